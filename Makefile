# attnres: set-up, build, test and the main job. Everything builds in release: a debug
# build is 6 GB and trains 14x slower.

CACHE            ?= $(HOME)/.cache/attnres
LIBTORCH         ?= $(CACHE)/libtorch-2.9.0-cpu
CARGO_TARGET_DIR ?= $(CACHE)/target
FEATURES         ?= tch
# torch-sys rebuilds whenever these change, so build and test must see the same values.
export LIBTORCH CARGO_TARGET_DIR

CARGO = cargo
BIN   = $(CARGO_TARGET_DIR)/release/attnres

.PHONY: setup build test lint quick clean

setup: $(LIBTORCH)/.complete

$(LIBTORCH)/.complete:
	scripts/setup-libtorch.sh $(LIBTORCH)

build: setup
	$(CARGO) build --release --locked --features $(FEATURES)

test: setup
	$(CARGO) test --release --locked --features $(FEATURES)

lint: setup
	$(CARGO) fmt --check
	$(CARGO) clippy --release --locked --features $(FEATURES) --all-targets -- -D warnings

# The main job. Until the sweep runner lands this prints the model table of the quick sizes.
quick: build
	$(BIN) model --d-model 256 --n-blocks 8 --residual baseline,full,block:4

clean:
	$(CARGO) clean
