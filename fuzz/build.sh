#!/usr/bin/env bash
# Build the libFuzzer binaries with the instrumentation cargo-fuzz uses, on
# the stable toolchain: SanitizerCoverage through LLVM pass flags (no
# `-Zsanitizer`). The binaries land in target/<triple>/fuzz/.
set -euo pipefail
cd "$(dirname "$0")"
# The workspace's versions of every shared dependency (cargo adds libFuzzer's).
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
triple=$(rustc -vV | sed -n 's/^host: //p')
# Always fuzz/target, whatever CARGO_TARGET_DIR says: the binaries are looked
# for there (ci.sh), and instrumented builds must not mix with the
# workspace's.
export CARGO_TARGET_DIR="$PWD/target"
export RUSTFLAGS="-Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing"
exec cargo build --profile fuzz --features libfuzzer --target "$triple" --bins "$@"
