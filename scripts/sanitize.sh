#!/usr/bin/env bash
# The test suite under sanitizers, each in its own build directory:
#   scripts/sanitize.sh address   ASan + UBSan (build-asan/): every test; a memory error, a leak or undefined
#                                 behaviour fails it
#   scripts/sanitize.sh thread    TSan (build-tsan/): the tests that run threads against each other (a worker and
#                                 its clients, the weight-sync channels, the wire), OpenMP on one thread (libgomp
#                                 is not instrumented, so its own synchronisation would be reported)
# Extra arguments go to ctest (e.g. -R Wire). Exits non-zero on any failure or report.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
shift || true
case "$mode" in
  address) build_dir=build-asan sanitizers=address,undefined ;;
  thread) build_dir=build-tsan sanitizers=thread ;;
  *) echo "scripts/sanitize.sh: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
esac
scripts/ensure_deps.sh rlcpp >/dev/null  # the Debian packages (the build below is separate)
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLCPP_SANITIZE="$sanitizers" -DRLCPP_CUDA=OFF >&2
fi
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizer/tsan.supp
if [ "$mode" = thread ]; then
  tests=(core_wire_test rollout_worker_test weightsync_channels_test)
  targets=()
  for t in "${tests[@]}"; do targets+=(--target "$t"); done
  cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" >&2
  status=0
  for t in "${tests[@]}"; do
    echo "tsan: $t" >&2
    OMP_NUM_THREADS=1 RLCPP_SOURCE_DIR=$PWD "$build_dir/$t" "$@" || status=1
  done
  exit $status
else
  cmake --build "$build_dir" -j"$(nproc)" >&2
  cd "$build_dir"
  ctest --output-on-failure -j"$(nproc)" "$@"
fi
