#!/usr/bin/env bash
# The tests under sanitizers, each mode in its own clang build (scripts/instrumented_build.sh):
#   scripts/sanitize.sh address [TEST ...]  ASan + UBSan (build-asan/, shared with scripts/fuzz.sh): the given
#                                           test executables, or every test (ctest) but those below; a memory
#                                           error, a leak or undefined behaviour fails it
#   scripts/sanitize.sh thread [TEST ...]   TSan (build-tsan/): the given test executables, or those that run
#                                           threads against each other (a worker and its clients, the weight-sync
#                                           channels, the wire and the CURVE handler, the async pipeline's draws
#                                           beside the trainer, the HTTP server's handlers beside its engine
#                                           loop, episodes' session turns on workers); OpenMP on one thread
#                                           (the OpenMP runtimes are not instrumented, so their own
#                                           synchronisation would show)
# Instrumented code is built at -O1 by another compiler, whose floating-point contractions differ from the release
# build's, so the full address run leaves out the tests that measure the process's memory (ASan's allocator holds
# on to freed memory) or how far a fixed-seed training run learns (other bits, other curve): ProcessMemory.*, the
# learning thresholds of LoopSft.ShortRun*, LoopAlgorithms.*Raises*, LoopTrain.*Raises*. CI (.ci/run) runs the
# parser, wire, worker and weight-sync tests in both modes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-address}
shift || true
case "$mode" in
  address | thread) ;;
  *) echo "scripts/sanitize.sh: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
esac
tests=("$@")
if [ "$mode" = thread ] && ((${#tests[@]} == 0)); then
  tests=(core_wire_test core_curve_test rollout_worker_test rollout_worker_curve_test weightsync_channels_test
         loop_async_test rollout_serve_test loop_serve_sessions_test loop_worker_turns_test loop_harness_test)
fi
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizer/tsan.supp
export RLCPP_SOURCE_DIR=$PWD
if ((${#tests[@]} == 0)); then
  build_dir=$(scripts/instrumented_build.sh "$mode")
  cd "$build_dir"
  exec ctest --output-on-failure -j"$(nproc)" \
    -E "ProcessMemory\.|LoopSft\.ShortRun|LoopAlgorithms\..*Raises|LoopTrain\..*Raises"
fi
targets=("${tests[@]}")
for t in "${tests[@]}"; do
  [[ $t == app_* ]] && targets+=(rlcpp)  # they run the CLI
done
build_dir=$(scripts/instrumented_build.sh "$mode" "${targets[@]}")
# Runs a test executable, at most RLCPP_SANITIZE_LIMIT_S seconds (600): past that it prints every thread's stack
# (gdb) and the test's last lines, and fails, so that a hang names itself instead of using up CI's time.
run_bounded() {
  local log limit=${RLCPP_SANITIZE_LIMIT_S:-600} waited=0 pid rc
  log=$(mktemp)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && ((waited < limit)); do
    sleep 1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "sanitize $mode: $1 still running after ${limit} s; its threads:" >&2
    gdb -batch -p "$pid" -ex "thread apply all bt" 2>&1 | grep -E "^(Thread|#)" >&2 || true
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rc=124
  else
    wait "$pid" && rc=0 || rc=$?
  fi
  if ((rc != 0)); then
    echo "sanitize $mode: $1 failed (exit $rc); its output:" >&2
    tail -n 200 "$log" >&2
  else
    grep -E "^\[  (PASSED|SKIPPED) " "$log" >&2 || true
  fi
  rm -f "$log"
  return $rc
}
# Under TSan a CURVE subscriber that refused a stranger's key sometimes takes nothing from the admitted publisher
# that follows (ZAP admits it; its weights never reach the socket): about half the runs under TSan, none in 350
# runs of the release build, loaded or not. libzmq is not instrumented, so TSan neither checks it nor explains
# this; the case runs in the normal suite and under ASan.
if [ "$mode" = thread ]; then
  export GTEST_FILTER=-WeightSyncZmq.CurveSubscriberAcceptsAdmittedPublishersOnly
fi
status=0
for t in "${tests[@]}"; do
  echo "sanitize $mode: $t" >&2
  OMP_NUM_THREADS=$([ "$mode" = thread ] && echo 1 || nproc) run_bounded "$build_dir/$t" || status=1
done
exit $status
