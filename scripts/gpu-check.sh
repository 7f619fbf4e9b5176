#!/usr/bin/env bash
# Checks a CUDA build of attnres on a GPU machine (docs/gpu.md): the GPU is seen
# and `plan` checks memory against it; the smoke sweep trains in f32 (its losses set against
# a CPU run's, step by step) and in bf16; a run killed with SIGKILL and resumed on the GPU
# matches an uninterrupted one, which matches a second uninterrupted one; `bench` times
# training at the reference size and at gpu-scaling's sizes (f32, bf16, f32 with TF32
# matmuls) and inference; the gpu-scaling sweep trains its first size end to end; and
# `bench --split` measures how a sweep should share the machine's CPU cores. Each
# check has a time limit, and the ones that no longer fit in TOTAL_S are skipped and say so.
#
#   scripts/gpu-check.sh BINARY OUT_DIR [TOTAL_S]
#
# BINARY is `make build-cuda`'s attnres (or a stripped copy; then LD_LIBRARY_PATH must reach
# a torch 2.11 CUDA `torch/lib`). OUT_DIR gets log.txt, results.tgz (steps, summaries) and
# dmon.txt (the GPU's load each second).
# The corpus comes from $ATTNRES_CACHE (`attnres data fetch` beforehand on a machine with
# no network). DEVICE (default cuda) picks another GPU, e.g. cuda:1; ONLY="NAME ..." runs
# only the checks of those names.
set -u
B=$(realpath "$1")
OUT=$(realpath -m "$2")
TOTAL_S=${3:-420}
D=${DEVICE:-cuda}
mkdir -p "$OUT"
W=$(mktemp -d)
LOG=$OUT/log.txt
START=$EPOCHREALTIME
: >"$LOG"

say() { echo "$*" | tee -a "$LOG"; }
elapsed() { awk -v a="$START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# check NAME LIMIT_S COMMAND...: runs COMMAND under LIMIT_S if that still fits in TOTAL_S.
check() {
    local name=$1 limit=$2
    shift 2
    if [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]]; then
        return
    fi
    local left
    left=$(awk -v t="$TOTAL_S" -v e="$(elapsed)" 'BEGIN { printf "%d", t - e }')
    if ((left < limit / 2)); then
        say "== $name: skipped ($left s left of $TOTAL_S, it may take $limit)"
        return
    fi
    ((limit > left)) && limit=$left
    say "== $name (at $(elapsed) s, $(date -u +%T) UTC, limit $limit s): $*"
    local t0=$EPOCHREALTIME
    timeout -s KILL "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    say "-- $name: rc $rc in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}

# The step, train loss, val loss and val accuracy columns of a run's steps.csv.
losses() { cut -d, -f1,4,5,6 "$1/steps.csv"; }

kill_resume() {
    local spec=$W/spec.yaml
    cat >"$spec" <<'YAML'
model: {vocab_size: 256, d_model: 128, n_blocks: 4, n_heads: 2, context: 128, residual: {variant: block, block_size: 2}}
data:
  corpus: {synthetic: {task: khop, hops: 2, n_vars: 6, train_examples: 4000, val_examples: 128}}
train:
  batch_size: 16
  lr: 0.003
  warmup: 10
  budget: {tokens: KR_TOKENS}
  eval_every: 20
  eval_batches: 2
  checkpoint_every: 15
seed: 3
YAML
    sed -i "s/KR_TOKENS/${KR_TOKENS:-409600}/" "$spec"
    local t0=$EPOCHREALTIME
    "$B" train "$spec" --out "$W/kr/a" --device "$D" >/dev/null || return 1
    local full
    full=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
    "$B" train "$spec" --out "$W/kr/b" --device "$D" >/dev/null || return 1
    for f in 0.35 0.6 0.85; do
        "$B" train "$spec" --out "$W/kr/c" --device "$D" >/dev/null 2>&1 &
        local pid=$!
        sleep "$(awk -v t="$full" -v f="$f" 'BEGIN { print t * f }')"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        echo "killed at ${f} of ${full} s: $(($(wc -l <"$W/kr/c/steps.csv" 2>/dev/null || echo 1) - 1)) steps logged"
    done
    "$B" train "$spec" --out "$W/kr/c" --device "$D" >/dev/null || return 1
    echo "steps: $(($(wc -l <"$W/kr/a/steps.csv") - 1)); last: $(tail -n 1 "$W/kr/a/steps.csv")"
    if cmp -s <(losses "$W/kr/a") <(losses "$W/kr/b"); then
        echo "two uninterrupted runs: identical losses"
    else
        echo "two uninterrupted runs DIFFER:"
        diff <(losses "$W/kr/a") <(losses "$W/kr/b") | head -n 8
    fi
    if cmp -s <(losses "$W/kr/a") <(losses "$W/kr/c"); then
        echo "killed three times and resumed: identical losses"
    else
        echo "killed and resumed DIFFERS:"
        diff <(losses "$W/kr/a") <(losses "$W/kr/c") | head -n 8
        return 1
    fi
}

bf16_smoke() {
    sed -e 's/^name: smoke/name: smoke-bf16/' -e 's/^train:/train:\n  precision: bf16/' \
        sweeps/smoke.yaml >"$W/smoke-bf16.yaml"
    "$B" run "$W/smoke-bf16.yaml" --device "$D" --results "$W/r" &&
        "$B" status "$W/smoke-bf16.yaml" --results "$W/r"
}

# The smoke sweep on the GPU and on the CPU, and the largest difference between their losses
# over every logged step of every run (train and val).
smoke_vs_cpu() {
    "$B" run sweeps/smoke.yaml --device "$D" --results "$W/r" >/dev/null &&
        "$B" run sweeps/smoke.yaml --device cpu --results "$W/cpu" >/dev/null &&
        "$B" status sweeps/smoke.yaml --results "$W/r" &&
        python3 - "$W/r/smoke" "$W/cpu/smoke" <<'PY'
import csv, pathlib, sys
gpu, cpu = (pathlib.Path(p) for p in sys.argv[1:])
worst, steps = 0.0, 0
for run in sorted(p.parent for p in gpu.glob("*/steps.csv")):
    a = list(csv.DictReader(open(run / "steps.csv")))
    b = list(csv.DictReader(open(cpu / run.name / "steps.csv")))
    assert len(a) == len(b), run.name
    for x, y in zip(a, b):
        steps += 1
        for k in ("loss/train", "loss/val"):
            if x[k] and y[k]:
                worst = max(worst, abs(float(x[k]) - float(y[k])))
print(f"GPU against CPU: largest loss difference {worst:.2e} over {steps} steps")
PY
}

# gpu-scaling with only SIZES (e.g. "xl, xxl"), one budget, and half its micro-batch, so that
# the three arms' processes fit on one GPU at once; bench prints nothing until it ends, so
# each call covers two sizes and a time limit loses no more than those.
sizes_sweep() {
    local file=$W/gpu-bench-${1//[^a-z]/}.yaml
    sed -e "s/^sizes: .*/sizes: [$1]/" -e '/^budgets:/,/^lr:/{/^lr:/!d}' \
        -e '/^grid:/,/^train:/{/^train:/!d}' -e 's/^train:/train:\n  micro_batches: 2/' \
        sweeps/gpu-scaling.yaml >"$file"
    echo "$file"
}

# How a sweep should split this machine's CPU cores into runs at once x threads per run
# (issue 13: "on 16 cores, which split"), at micro with 18 runs, so that the default's one
# single-thread run per core is not capped below the cores (up to 18 cores).
cpu_split() {
    cat >"$W/split.yaml" <<'YAML'
name: split
data: {corpus: shakespeare, tokenizer: byte}
model: {context: 128, head_dim: 32}
sizes: [micro]
residual: [baseline, full, {variant: block, block_size: 2}]
seeds: [0, 1, 2, 3, 4, 5]
train: {batch_size: 16, lr: 0.003, budget: {tokens: 1.0e6}}
YAML
    "$B" bench --backend tch --device cpu --split --sizes "$W/split.yaml" --steps 10 --json >"$OUT/split.json" &&
        python3 - "$OUT/split.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['cores']} cores, {r['machine']}")
for x in r["rows"]:
    print(f"{x['size']} {x['jobs']} x {x['threads']}: {x['tokens_per_s_median']:.0f} tokens/s, "
          f"{x['vs_default_median']:.3f}x [{x['vs_default_ci_low']:.3f}, {x['vs_default_ci_high']:.3f}]")
PY
}

export B W D OUT
export -f losses kill_resume bf16_smoke smoke_vs_cpu cpu_split
say "attnres GPU check, $(date -u +%FT%TZ), binary $B"
# The GPU's load second by second (SM and memory %), to tell a step bound by the host
# issuing kernels from one bound by the GPU: set its clock times against the log's.
if command -v nvidia-smi >/dev/null; then
    nvidia-smi dmon -s u -o T >"$OUT/dmon.txt" 2>&1 &
    DMON=$!
fi
check gpu 20 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
check version 20 "$B" --version
check plan 60 "$B" plan sweeps/gpu-scaling.yaml --device "$D" --results "$W/r"
check smoke-f32 90 bash -c smoke_vs_cpu
check kill-resume 100 bash -c kill_resume
BENCH=("$B" bench --backend tch --device "$D" --steps 10 --sizes)
check bench-f32-medium-large 60 "${BENCH[@]}" "$(sizes_sweep "medium, large")"
check bench-f32-xl-xxl 110 "${BENCH[@]}" "$(sizes_sweep "xl, xxl")"
check bench-reference-f32 50 "$B" bench --backend tch --device "$D" --steps 20
check bench-inference-f32 50 "$B" bench --backend tch --device "$D" --steps 20 --inference --context 1024 --batch-size 16
check smoke-bf16 60 bash -c bf16_smoke
check bench-bf16-medium-large 50 "${BENCH[@]}" "$(sizes_sweep "medium, large")" --precision bf16
check bench-bf16-xl-xxl 90 "${BENCH[@]}" "$(sizes_sweep "xl, xxl")" --precision bf16
# libtorch keeps f32 matmuls in full f32 on CUDA unless this asks for TF32 tensor cores.
check bench-tf32-medium-large 50 env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 "${BENCH[@]}" "$(sizes_sweep "medium, large")"
check bench-tf32-xl-xxl 90 env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 "${BENCH[@]}" "$(sizes_sweep "xl, xxl")"
check gpu-scaling-medium 120 bash -c "'$B' run sweeps/gpu-scaling.yaml --device '$D' --results '$W/r' --filter size=medium && '$B' status sweeps/gpu-scaling.yaml --results '$W/r'"
check cpu-split 180 bash -c cpu_split
say "== done at $(elapsed) s ($(date -u +%T) UTC)"
[[ -n ${DMON:-} ]] && kill "$DMON" 2>/dev/null
(cd "$W" && find . \( -name steps.csv -o -name summary.json -o -name status.json -o -name spec.json \) -print0 |
    tar -czf "$OUT/results.tgz" --null -T -)
