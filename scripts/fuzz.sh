#!/usr/bin/env bash
# Fuzzes every parser of outside input (tests/fuzz/fuzz_*.cpp) with libFuzzer under ASan + UBSan: builds them
# with clang into build-asan/ (scripts/instrumented_build.sh, shared with scripts/sanitize.sh address), then runs
# each for $RLCPP_FUZZ_SECONDS (default 30) from its seed corpus in tests/fuzz/corpus/<parser>/ (new inputs go to
# a scratch copy, not into the repo).
# A crash, a sanitizer report, a leak or a hang past 10 s fails the script and leaves the input that caused it in
# build-asan/artifacts/ — make it a regression test. Usage: scripts/fuzz.sh [PARSER ...] (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${RLCPP_FUZZ_SECONDS:-30}
parsers=("$@")
if ((${#parsers[@]} == 0)); then
  for src in tests/fuzz/fuzz_*.cpp; do parsers+=("$(basename "$src" .cpp | sed 's/^fuzz_//')"); done
fi
targets=()
for p in "${parsers[@]}"; do targets+=("fuzz_$p"); done
build_dir=$(scripts/instrumented_build.sh address "${targets[@]}")

mkdir -p "$build_dir/artifacts"
status=0
for p in "${parsers[@]}"; do
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$p/." "$scratch/"
  echo "fuzz $p: ${seconds}s from $(ls "tests/fuzz/corpus/$p" | wc -l) seeds" >&2
  # One process per input run; OpenMP stays on one thread so a run is one deterministic call.
  if ! OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$build_dir/fuzz_$p" "$scratch" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/${p}-" 2>"$build_dir/fuzz_$p.log"; then
    echo "fuzz $p: FAILED (input in $build_dir/artifacts/, log $build_dir/fuzz_$p.log):" >&2
    tail -40 "$build_dir/fuzz_$p.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$build_dir/fuzz_$p.log" | tail -2 >&2
  fi
  rm -rf "$scratch"
done
exit $status
