#!/usr/bin/env bash
# Build the engine into the virtualenv (`maturin develop --release`), with profile-guided
# optimization (PGO) unless PGO=0: an instrumented build of the engine's `examples/run` runs the
# training scenarios (scripts/pgo/*.toml and the shipped validation scenarios), and the Python
# module is compiled with the merged profile (~12% less CPU time on delay-mapping; results are
# bit-identical: the profile guides inlining and code layout, not arithmetic).
# Needs llvm-profdata of the toolchain's own LLVM (rustup component llvm-tools); without it the
# build goes on without PGO and says so.
# The same build (same flags, same target directory) also writes the wheel into target/wheels/:
# a package that installs without Rust (tests/test_wheel.py installs it into a fresh venv).
# usage: VIRTUAL_ENV=.venv scripts/build-engine.sh PATH/TO/maturin
set -euo pipefail
cd "$(dirname "$0")/.."
maturin=$1

plain() {
    "$maturin" develop --release --quiet
    rm -f target/wheels/numasim-*.whl
    "$maturin" build --release --quiet --out target/wheels >/dev/null
}

if [ "${PGO:-1}" = "0" ]; then
    plain
    exit 0
fi

profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null 2>&1; then
    rustup component add llvm-tools >&2 || true
fi
if [ ! -x "$profdata" ]; then
    echo "note: no llvm-profdata (rustup component add llvm-tools): building the engine without PGO" >&2
    plain
    exit 0
fi

dir=$PWD/target/pgo
rm -rf "$dir/raw"
mkdir -p "$dir/raw"
echo "PGO: instrumented build, training runs, optimized build (PGO=0 skips this)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$dir/raw" CARGO_TARGET_DIR=target/pgo-gen \
    cargo build --release --quiet -p numasim-engine --example run
for f in scripts/pgo/*.toml python/numasim/validation/*.toml; do
    target/pgo-gen/release/examples/run "$f" >/dev/null || {
        echo "error: PGO training scenario $f failed (PGO=0 builds without training)" >&2
        exit 1
    }
done
"$profdata" merge -o "$dir/numasim.profdata" "$dir/raw"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$dir/numasim.profdata" CARGO_TARGET_DIR=target/pgo-use plain
