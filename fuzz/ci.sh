#!/usr/bin/env bash
# The CI fuzz step (scripts/test runs it):
#  1. every committed input of every target through its target function,
#     built as an ordinary test (tests/corpus.rs) in the workspace's target
#     directory, where `cargo test --workspace` already compiled the
#     dependencies;
#  2. the router's targets (router_frames, l3_neighbours, router_toml,
#     cca_spec) built with libFuzzer and fuzzed for FUZZ_SECONDS each
#     (default 20) from their corpus. Those four build in about a minute and
#     a half; the transport's and the `tollgate` command's targets need an
#     instrumented build of rustls, ring, tokio, hyper, plotters... (over
#     seven minutes of CPU), so CI replays their corpus only.
# A crash fails the step; libFuzzer prints the input and it is kept under
# $FUZZ_OUT (default: a temporary directory). Under CI=true a missing C++
# compiler (libFuzzer is C++) fails the step instead of skipping it.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)
seconds="${FUZZ_SECONDS:-20}"

if ! command -v c++ >/dev/null 2>&1; then
  if [ "${CI:-}" = true ]; then
    echo "CI=true but no C++ compiler (c++) to build libFuzzer: install build-essential (.ci/run)" >&2
    exit 1
  fi
  echo "SKIP: fuzz targets (install a C++ compiler, e.g. build-essential, to build libFuzzer)"
  exit 0
fi

# The workspace's versions of every shared dependency (cargo adds libFuzzer's).
cp ../Cargo.lock Cargo.lock
echo "-- cargo fmt --check (fuzz/)"
cargo fmt -- --check
echo "-- corpus replay, every target (cargo test in fuzz/)"
CARGO_TARGET_DIR="$root/target" cargo test --quiet

echo "-- libFuzzer build of the router targets"
./build.sh --quiet --no-default-features
triple=$(rustc -vV | sed -n 's/^host: //p')
bin="target/$triple/fuzz"
out="${FUZZ_OUT:-$(mktemp -d)}"
for t in router_frames l3_neighbours router_toml cca_spec; do
  # New inputs go to a scratch copy of the corpus, not into the repository.
  work="$out/$t"
  mkdir -p "$work/corpus"
  cp "corpus/$t"/* "$work/corpus/"
  if ! "$bin/$t" "$work/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/" 2>"$work/fuzz.log"; then
    tail -60 "$work/fuzz.log"
    echo "$t: crash; its input is kept in $work/" >&2
    exit 1
  fi
  echo "-- $t: $(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log") executions in ${seconds} s, no crash"
done
