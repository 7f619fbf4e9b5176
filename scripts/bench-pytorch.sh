#!/usr/bin/env bash
# attnres against eager PyTorch on the same model, threads and batch (issue 13): training
# steps of the baseline, Full and Block AttnRes (S = 4) at `attnres bench`'s reference size
# (d 256, 8 blocks, 4 heads, context 256, 8 sequences, vocab 256).
#
#   scripts/bench-pytorch.sh [THREADS] [ROUNDS]     # defaults: nproc, 3
#
# Makes (once) a venv with torch 2.11.0 from PyPI, the same one `make build-cuda` uses, then
# alternates ROUNDS times between `attnres bench --json` and scripts/bench_pytorch.py (each
# 20 timed steps after 2 warm-up, arms interleaved), so that both see the same machine, and
# prints tokens/s per arm and the attnres/PyTorch ratio of each round. Not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
rounds=${2:-3}
cache=${ATTNRES_CACHE:-$HOME/.cache/attnres}
venv=${ATTNRES_TORCH_VENV:-$cache/torch-2.11-cuda}
bin=${ATTNRES_BIN:-${CARGO_TARGET_DIR:-$cache/target}/release/attnres}
[ -x "$bin" ] || { echo "error: $bin is not built; run make build first" >&2; exit 2; }
if ! "$venv/bin/python" -c 'import torch; import numpy; assert torch.__version__.startswith("2.11.0")' 2>/dev/null; then
  echo "bench-pytorch: installing torch 2.11.0 into $venv (about 4.6 GB, once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch==2.11.0 numpy
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  echo "bench-pytorch: round $r of $rounds, $threads thread(s)" >&2
  "$bin" bench --backend tch --threads "$threads" --json > "$out/attnres.$r.json"
  "$venv/bin/python" scripts/bench_pytorch.py --threads "$threads" > "$out/torch.$r.json"
done
python3 - "$out" "$rounds" "$threads" <<'PY'
import json, os, statistics, sys
out, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ours = [json.load(open(os.path.join(out, f"attnres.{r}.json"))) for r in range(1, rounds + 1)]
theirs = [json.load(open(os.path.join(out, f"torch.{r}.json"))) for r in range(1, rounds + 1)]
labels = {"baseline": "baseline", "full": "full", "block S=4": "block S=4"}
print(f"machine: {ours[0]['machine']}, {ours[0]['cores']} cores, {threads} thread(s); "
      f"attnres tch f32 vs eager PyTorch {theirs[0]['torch']}; {rounds} rounds of 20 steps")
print(f"reference size: d {theirs[0]['d_model']}, {theirs[0]['n_blocks']} blocks, "
      f"{theirs[0]['batch']} x {theirs[0]['context']} tokens per step")
print(f"{'arm':<11} {'attnres tok/s':>26} {'PyTorch tok/s':>26} {'attnres / PyTorch':>24}")
def span(xs):
    return f"{statistics.median(xs):7.0f} [{min(xs):6.0f}, {max(xs):6.0f}]"
for i, (label, theirs_label) in enumerate(labels.items()):
    a = [next(row for row in o["rows"] if row["label"].startswith(label.split()[0]))["tokens_per_s"] for o in ours]
    b = [next(row for row in t["rows"] if row["label"] == theirs_label)["tokens_per_s"] for t in theirs]
    ratios = [x / y for x, y in zip(a, b)]
    print(f"{label:<11} {span(a):>26} {span(b):>26} "
          f"{statistics.median(ratios):6.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]")
print("median [min, max] over rounds; each round's figure is the median of its 20 steps")
PY
