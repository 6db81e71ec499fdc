# numasim: `make run` and `make test` are the contract (see README.md).
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# rustup installs cargo here; make it visible even from a bare environment.
export PATH := $(HOME)/.cargo/bin:$(PATH)

DEPS_STAMP  := $(VENV)/.deps-installed
BUILD_STAMP := $(VENV)/.engine-built
RUST_SRC    := Cargo.toml Cargo.lock $(shell find crates -type f \( -name '*.rs' -o -name '*.toml' \) 2>/dev/null)
# profile-guided build of the engine (scripts/build-engine.sh); `make setup PGO=0` builds without
PGO         ?= 1
PGO_INPUTS  := scripts/build-engine.sh $(wildcard scripts/pgo/*.toml python/numasim/validation/*.toml)

# A fresh clone has no compiled module even if an old venv stamp survived.
ifeq ($(wildcard python/numasim/_engine*.so),)
$(shell rm -f $(BUILD_STAMP))
endif

.PHONY: help setup run test bench lint check-cargo clean workloads test-vm system-deps fuzz fuzz-engine

help:
	@echo "make setup   create .venv, install pinned tools, build the engine (PGO=0: no profile-guided build)"
	@echo "make run     reproduce autonuma-balancing (prints the table)"
	@echo "make test    cargo tests + pytest (one worker per CPU, pytest-xdist)"
	@echo "make bench   simulator speed (numasim bench)"
	@echo "make lint    cargo clippy + python compileall"
	@echo "make system-deps  install the missing Debian packages of system-packages.txt (chromium, ...)"
	@echo "make workloads  static C workloads for real-kernel runs (build/realkernel/numaw)"
	@echo "make test-vm    real-kernel validation in QEMU (6.1 and 6.12; needs system-deps)"
	@echo "make fuzz       coverage-guided fuzzing of the scenario parser, 10^6 inputs (docs/fuzzing.md)"

check-cargo:
	@command -v cargo >/dev/null 2>&1 || { \
	  echo "error: cargo (the Rust toolchain) is not on PATH." >&2; \
	  echo "Install it with rustup:  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2; \
	  echo "then open a new shell (or 'source \$$HOME/.cargo/env') and run make again." >&2; \
	  exit 1; }

$(PY):
	python3 -m venv $(VENV)

$(DEPS_STAMP): requirements-dev.txt | $(PY)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements-dev.txt
	@touch $@

$(BUILD_STAMP): $(DEPS_STAMP) pyproject.toml $(RUST_SRC) $(PGO_INPUTS) | check-cargo
	VIRTUAL_ENV=$(abspath $(VENV)) PGO=$(PGO) bash scripts/build-engine.sh $(abspath $(BIN)/maturin)
	@touch $@

setup: check-cargo $(BUILD_STAMP)

run: setup
	$(BIN)/numasim reproduce autonuma-balancing

test: setup system-deps fuzz-engine
	cargo test --release --workspace --exclude numasim-py
	$(BIN)/pytest -q -n auto --dist loadfile tests

bench: setup
	$(BIN)/numasim bench

lint: setup
	cargo clippy --workspace --exclude numasim-py -- -D warnings
	$(PY) -m compileall -q python/numasim tests

clean:
	rm -rf $(VENV) python/numasim/_engine*.so

# Debian packages (system-packages.txt, one per line): only the missing ones are installed,
# with sudo when not root. chromium loads the HTML report in tests/test_report.py.
system-deps:
	@bash scripts/system-deps.sh system-packages.txt

# Real-kernel workloads (C sources shipped in the package): one static binary, no libnuma, no Rust.
NUMAW     := build/realkernel/numaw
WORKLOADS := python/numasim/realkernel/workloads
NUMAW_SRC := $(wildcard $(WORKLOADS)/*.c $(WORKLOADS)/*.h)

$(NUMAW): $(NUMAW_SRC)
	@mkdir -p $(@D)
	gcc -O2 -Wall -Wextra -Wno-unused-parameter -static -pthread -o $@ $(filter %.c,$(NUMAW_SRC)) -lm

workloads: $(NUMAW)

# Boots Debian kernels in QEMU (TCG): several minutes, so not part of `make test`.
test-vm: system-deps $(NUMAW) | $(PY)
	NUMASIM_VM_TESTS=1 $(BIN)/pytest -q tests/test_realkernel_vm.py

# The engine with SanitizerCoverage for fuzz/scenario_fuzz.py (stable Rust; tests/test_fuzz.py
# runs a short campaign with it), and the long campaign of docs/fuzzing.md.
FUZZ_ENGINE := target/fuzz-engine/_engine.so

$(FUZZ_ENGINE): $(RUST_SRC) fuzz/build-engine.sh | check-cargo
	bash fuzz/build-engine.sh

fuzz-engine: $(FUZZ_ENGINE)

FUZZ_RUNS ?= 1000000
fuzz: setup fuzz-engine
	$(PY) fuzz/seeds.py target/fuzz-seeds
	@mkdir -p target/fuzz-corpus target/fuzz-artifacts
	nice -n 19 $(PY) fuzz/scenario_fuzz.py -runs=$(FUZZ_RUNS) -print_final_stats=1 \
	    -artifact_prefix=target/fuzz-artifacts/ target/fuzz-corpus target/fuzz-seeds
