#!/usr/bin/env bash
# The tests under sanitizers, each mode in its own build directory:
#   scripts/sanitize.sh address [TEST ...]  ASan + UBSan (build-asan/): the given test executables, or every
#                                           test (ctest) but those below; a memory error, a leak or undefined
#                                           behaviour fails it
#   scripts/sanitize.sh thread [TEST ...]   TSan (build-tsan/): the given test executables, or those that run
#                                           threads against each other (a worker and its clients, the weight-sync
#                                           channels, the wire and the CURVE handler); OpenMP on one thread
#                                           (libgomp is not instrumented, so its own synchronisation would show)
# Instrumented code is built at -O1, whose floating-point contractions differ from the release build's, so the
# full address run leaves out the tests that measure the process's memory (ASan's allocator holds on to freed
# memory) or how far a fixed-seed training run learns (other bits, other curve): ProcessMemory.*, the learning
# thresholds of LoopSft.ShortRun*, LoopAlgorithms.*Raises*, LoopTrain.*Raises*. CI (.ci/run) runs the parser,
# wire, worker and weight-sync tests in both modes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
shift || true
case "$mode" in
  address) build_dir=build-asan sanitizers=address,undefined ;;
  thread) build_dir=build-tsan sanitizers=thread ;;
  *) echo "scripts/sanitize.sh: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
esac
tests=("$@")
if [ "$mode" = thread ] && ((${#tests[@]} == 0)); then
  tests=(core_wire_test core_curve_test rollout_worker_test weightsync_channels_test)
fi
scripts/ensure_deps.sh rlcpp >/dev/null  # the Debian packages (the instrumented build is separate)
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLCPP_SANITIZE="$sanitizers" -DRLCPP_CUDA=OFF >&2
fi
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizer/tsan.supp
export RLCPP_SOURCE_DIR=$PWD
if ((${#tests[@]} == 0)); then
  cmake --build "$build_dir" -j"$(nproc)" >&2
  cd "$build_dir"
  exec ctest --output-on-failure -j"$(nproc)" \
    -E "ProcessMemory\.|LoopSft\.ShortRun|LoopAlgorithms\..*Raises|LoopTrain\..*Raises"
fi
targets=()
for t in "${tests[@]}"; do
  targets+=(--target "$t")
  [[ $t == app_* ]] && targets+=(--target rlcpp)  # they run the CLI
done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" >&2
status=0
for t in "${tests[@]}"; do
  echo "sanitize $mode: $t" >&2
  OMP_NUM_THREADS=$([ "$mode" = thread ] && echo 1 || nproc) "$build_dir/$t" --gtest_brief=1 || status=1
done
exit $status
