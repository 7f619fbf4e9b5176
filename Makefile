# attnres: set-up, build, test and the main job. Everything builds in release: a debug
# build is 6 GB and trains 14x slower.

CACHE            ?= $(HOME)/.cache/attnres
LIBTORCH         ?= $(CACHE)/libtorch-2.9.0-cpu
CARGO_TARGET_DIR ?= $(CACHE)/target
# The binary of build, quick and bench has libtorch only; the tests also compare the pure-Rust
# flex backend with it, and flex is a seventh of a cold build, so only test, lint and fuzz
# build it. Both builds write the same binary path: the last one built is the one there.
FEATURES         ?= tch
TEST_FEATURES    ?= tch flex
# TensorBoard from PyPI, for the test that reads event files with its own reader.
TENSORBOARD_VENV ?= $(CACHE)/tensorboard-venv
# torch-sys rebuilds whenever these change, so build and test must see the same values.
export LIBTORCH CARGO_TARGET_DIR TENSORBOARD_VENV

CARGO = cargo
BIN   = $(CARGO_TARGET_DIR)/release/attnres
# Sweeps whose reference results and reports are committed (results/reference/, reports/reference/).
REPORTED = quick scaling block_size block_schedule ablations mhc_attnres depth_width probes

.PHONY: setup build build-cuda gpu-check test lint fuzz bench bench-pytorch data quick report clean

setup: $(LIBTORCH)/.complete
	scripts/setup-chromium.sh
	scripts/setup-tensorboard.sh $(TENSORBOARD_VENV)
	scripts/setup-slurm.sh install

$(LIBTORCH)/.complete:
	scripts/setup-libtorch.sh $(LIBTORCH)

build: $(LIBTORCH)/.complete
	$(CARGO) build --release --locked --no-default-features --features "$(FEATURES)"

# A CUDA build for GPU machines (docs/gpu.md): torch 2.11 from PyPI (the CUDA 13 build, about
# 4.7 GB with its nvidia wheels) in a venv of its own, linked by an rpath into that venv. It
# compiles and links on a machine without a GPU; its own target folder keeps the CPU build.
# That folder starts as a copy of the CPU build's when there is one, so only torch-sys and
# what depends on it are compiled again.
CUDA_VENV   ?= $(CACHE)/torch-2.11-cuda
CUDA_TARGET ?= $(CACHE)/target-cuda
build-cuda:
	test -x $(CUDA_VENV)/bin/python || python3 -m venv $(CUDA_VENV)
	test -d $(CUDA_TARGET) || ! test -d $(CARGO_TARGET_DIR)/release || cp -a $(CARGO_TARGET_DIR) $(CUDA_TARGET)
	$(CUDA_VENV)/bin/pip install --quiet torch==2.11.0
	VIRTUAL_ENV=$(CUDA_VENV) PATH=$(CUDA_VENV)/bin:$$PATH LIBTORCH= LIBTORCH_USE_PYTORCH=1 \
	  LIBTORCH_BYPASS_VERSION_CHECK=1 CARGO_TARGET_DIR=$(CUDA_TARGET) \
	  ATTNRES_RPATH="$$($(CUDA_VENV)/bin/python -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib" \
	  $(CARGO) build --release --locked --no-default-features --features tch
	@echo "built $(CUDA_TARGET)/release/attnres against $(CUDA_VENV)"

# On a machine with a GPU (not a test): the checks of docs/gpu.md (plan, smoke f32/bf16,
# SIGKILL resume and determinism, bench at gpu-scaling's sizes, a real size), each with a
# time limit, GPU_CHECK_S seconds in all, into $(CACHE)/gpu-check/log.txt.
GPU_CHECK_S ?= 480
gpu-check: build-cuda
	$(CUDA_TARGET)/release/attnres data fetch shakespeare
	ATTNRES_CACHE=$(CACHE) scripts/gpu-check.sh $(CUDA_TARGET)/release/attnres $(CACHE)/gpu-check $(GPU_CHECK_S)

test: setup
	$(CARGO) build --release --locked --features "$(TEST_FEATURES)"
	$(BIN) data fetch shakespeare
	$(CARGO) test --release --locked --features "$(TEST_FEATURES)"

# Speed and memory of baseline, Full and Block AttnRes (not a test): training and inference at
# the reference size and at the scaling sweep's sizes (nano to mini), into benches/cpu.txt
# (docs/performance.md). BENCH_STEPS rounds per case: 20 take about 8 minutes; 60 narrow the
# ratios' intervals enough to judge a goal. BENCH_PROCESSES fresh children per case share
# those rounds: a process keeps a speed of its own, a point or two, that only several put
# into the intervals.
BENCH_STEPS ?= 20
BENCH_PROCESSES ?= 1
BENCH = $(BIN) bench --backend tch --steps $(BENCH_STEPS) --processes $(BENCH_PROCESSES)
bench: build
	mkdir -p benches
	{ $(BENCH) && \
	  $(BENCH) --sizes sweeps/scaling.yaml && \
	  $(BENCH) --inference --context 128 --batch-size 1 && \
	  $(BENCH) --inference --context 128 --batch-size 16 && \
	  $(BENCH) --inference --context 1024 --batch-size 1 && \
	  $(BENCH) --inference --context 1024 --batch-size 16 && \
	  $(BENCH) --inference --sizes sweeps/scaling.yaml --batch-size 1 && \
	  $(BENCH) --inference --sizes sweeps/scaling.yaml --batch-size 16; } | tee benches/cpu.txt

# attnres against eager PyTorch 2.11 on the same model and threads (a venv with torch from
# PyPI, made once; about 4.6 GB), into benches/pytorch.txt. Not part of make test.
bench-pytorch: build
	scripts/bench-pytorch.sh | tee benches/pytorch.txt

# Property-based tests of the sweep loader at full strength (the test run tries 3,000 cases).
fuzz: $(LIBTORCH)/.complete
	ATTNRES_FUZZ_CASES=100000 $(CARGO) test --release --locked --features "$(TEST_FEATURES)" --test sweep_fuzz -- --nocapture

lint: $(LIBTORCH)/.complete
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --features "$(TEST_FEATURES)" --all-targets -- -D warnings

# The built-in corpus, fetched once into $(CACHE) (the only download outside set-up).
data: build
	$(BIN) data fetch shakespeare

# The main job: the quick sweep on CPU into results/quick/, then its report in
# reports/quick/report.html (the committed reference report stays untouched).
quick: data
	$(BIN) run sweeps/quick.yaml
	$(BIN) report sweeps/quick.yaml

# Rebuild every reference report (reports/reference/NAME/) from the committed reference
# results (results/reference/NAME/); trains nothing.
report: build
	for s in $(REPORTED); do \
	  $(BIN) report sweeps/$$s.yaml --results results/reference || exit 1; \
	done

clean:
	$(CARGO) clean
