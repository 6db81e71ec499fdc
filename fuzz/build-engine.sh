#!/usr/bin/env bash
# The engine module with SanitizerCoverage (the instrumentation cargo-fuzz uses, stable Rust):
# atheris's libFuzzer then sees the Rust parser's and resolver's edges and comparisons, not only
# the Python ones. Writes target/fuzz-engine/_engine.so; stable Rust, no nightly needed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/fuzz-engine
sancov="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=3"
sancov+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table"
sancov+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
# an explicit --target keeps the flags off build scripts and proc macros (as cargo-fuzz does)
triple=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} $sancov" CARGO_TARGET_DIR=$out/cargo \
    cargo build --profile fuzz -p numasim-py --target "$triple" --quiet
cp "$out/cargo/$triple/fuzz/lib_engine.so" $out/_engine.so.tmp
mv $out/_engine.so.tmp $out/_engine.so
echo "$out/_engine.so"
