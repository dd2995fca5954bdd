#!/usr/bin/env bash
# The GPU check, on a lent GPU machine: the device tool's `run` with carry [".device"] (docs/gpu.md "GPU check").
# Unpacks the bundle scripts/device_bundle.sh made here (binaries built for sm_90 and x86-64-v3 with their
# libraries, and a warm-start checkpoint of the default task), finds CUDA's libraries on that machine (the
# toolkit's, or the nvidia-* wheels beside its PyTorch) for rlcpp's own binaries only, and runs its steps in
# order under ONE global deadline: each step's limit is min(its budget below, what the deadline leaves less
# 20 s for the summary), so the call ends inside the device tool's 600 s per command.
#
#   here:  scripts/device_bundle.sh
#   there: scripts/device_check.sh [first]   the tests and the loop (call 1)
#          scripts/device_check.sh bench     the benchmarks beside their PyTorch/HF peers (call 2, if time is left)
#
# Budgets, seconds (each an upper bound; RLCPP_DEVICE_CHECK_LIMIT_<STEP>=S overrides one, e.g. ..._GRPO_GPU=120;
# RLCPP_DEVICE_CHECK_BUDGET_S the whole, default 540; RLCPP_DEVICE_CHECK_ONLY=STEP,STEP,... runs only those, the
# others recorded as not selected: a rerun of what failed — in `first`, name smoke too, or nothing else runs):
#   first:  smoke 25 (nvidia-smi, ldd of every binary, `rlcpp devices`: driver and runtime versions,
#           core_exec_context_test; the run stops here when the basics fail) | kernels_cuda_ops 45 |
#           op_matrix 20 (every op × dtype each backend runs, against kernels/reference/) |
#           attention_cuda 40 | model_cuda 40 | rollout_cuda 45 | trainer_cuda 45 | grpo_gpu 75 (GRPO from the
#           carried warm start, trainer and colocated engine on cuda:0, batch-invariant: probe 0) | split_zmq 35 |
#           split_cuda_ipc 35 (the same seeded run must give the same samples and metrics) | ipc_same_gpu 25 |
#           ipc_w2_sync_time 35 | nccl_world_of_one 15 | nccl_join_timeout 20 | trainer_nccl 25
#           = 525 (+ the cases of a second GPU where there is one: ipc_another_gpu 25, nccl_two_gpus 30)
#   bench:  rollout_w1_invariant 100 | rollout_w1_cublas 100 | rollout_w2_b256_bf16 150 | rollout_w2_b1_bf16 90 |
#           train_w1_fp32 50 | train_w2_bf16 180 | step_w1_fp32 40 | step_w2_bf16 150 = 860: more than one call
#           holds (the peers compile with torch.compile: on the first H200 run, 2026-12-04, the W1 rollout step took
#           88.5 s, train_w1_fp32 30.8 s, step_w1_fp32 15.6 s, and train_w2_bf16 was still compiling its peer at
#           120 s), so a session runs `bench` with RLCPP_DEVICE_CHECK_ONLY naming what it has time for
# Results as they happen, under $OUT (the device tool returns at most 8 files; this leaves 3):
#   device_check.log   every step's output, appended live (a step cut off still shows its last `[ RUN ]` line)
#   device_check.json  the summary (scripts/device_summary.py), rewritten before and after every step
#   results.tar.gz     each step's log and gtest JSON, the runs' metrics: repacked after every step
# and one status line per step on stdout, then a table. Test binaries run with CUDA_LAUNCH_BLOCKING=1 (an
# asynchronous fault names the op that launched it) and RLCPP_GPU_TEST_TIMEOUT_S=10 (their waits).
# RLCPP_DEVICE_CHECK_DRY_RUN=1 runs it on a machine without a GPU (tests/device_check_dry_run.py: the script's
# logic in CI; the basics' GPU checks are reported, not fatal). RLCPP_DEVICE_CHECK_STALL=STEP replaces that step's
# command with a hang (the dry run's stand-in for a hung binary). Exits 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-first}
case $mode in
  first | bench) ;;
  *) echo "usage: scripts/device_check.sh [first|bench]" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/rlcpp_device_check}
mkdir -p "$out"
budget=${RLCPP_DEVICE_CHECK_BUDGET_S:-540}
reserve=20  # seconds kept after the last step for the summary and the packing
t0=$(date +%s)
deadline=$((t0 + budget))
dry_run=${RLCPP_DEVICE_CHECK_DRY_RUN:-0}
work=$(mktemp -d)
log=$out/device_check.log
: >"$log"
say() { echo "device_check: $*" | tee -a "$log"; }

bundle=${RLCPP_DEVICE_BUNDLE:-.device/bundle.tar.xz}
[ -f "$bundle" ] || { echo "device_check: no $bundle: run scripts/device_bundle.sh first and carry .device" >&2; exit 2; }
root=$work/bundle
mkdir -p "$root"
tar -C "$root" -xf "$bundle" || { echo "device_check: cannot unpack $bundle" >&2; exit 2; }
say "$mode: bundle of commit $(cat "$root/commit"), budget ${budget} s"
[ -f "$root/unguarded" ] && say "warning: $(cat "$root/unguarded")"

# CUDA's libraries for rlcpp's binaries only: the bundle's own, the toolkit's, the driver's, the nvidia-* wheels.
# The Python peers keep the machine's environment (rlcpp restores it for them from RLCPP_PEER_LD_LIBRARY_PATH).
cuda_dirs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do [ -d "$d" ] && cuda_dirs+=("$d"); done
while IFS= read -r d; do cuda_dirs+=("$d"); done < <(python3 - <<'EOF' 2>/dev/null
import glob, os, site
for p in site.getsitepackages():
    for d in sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib"))):
        print(d)
EOF
)
lib_path=$root/lib$( ((${#cuda_dirs[@]})) && printf ':%s' "${cuda_dirs[@]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rl=(env LD_LIBRARY_PATH="$lib_path" RLCPP_PEER_LD_LIBRARY_PATH="${LD_LIBRARY_PATH-}")  # "${rl[@]}" BINARY ...
export RLCPP_SOURCE_DIR=$PWD OMP_WAIT_POLICY=PASSIVE
rlcpp=$root/bin/rlcpp

gpu_text=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
meta() {  # meta.json: what the summary says about the run as a whole
  python3 - "$work/meta.json" "$@" <<'EOF'
import json, os, sys
path, pairs = sys.argv[1], sys.argv[2:]
meta = json.load(open(path)) if os.path.exists(path) else {}
for pair in pairs:
    key, value = pair.split("=", 1)
    meta[key] = int(value) if value.lstrip("-").isdigit() else value
json.dump(meta, open(path, "w"), indent=1)
EOF
}
meta mode="$mode" budget_s="$budget" gpu="$gpu_text" gpus="${gpus:-0}" dry_run="$dry_run" \
  bundle_commit="$(cat "$root/commit")" started="$(date -u +%FT%TZ)" finished=0 elapsed_s=0

summarize() {
  meta elapsed_s=$(($(date +%s) - t0))
  python3 scripts/device_summary.py "$work" "$out/device_check.json" "$@"
}
pack() {
  tar -C "$work" -czf "$out/results.tar.gz.tmp" --exclude=./bundle --exclude=checkpoints --exclude='*.safetensors' \
    . 2>/dev/null && mv "$out/results.tar.gz.tmp" "$out/results.tar.gz"
}
record() {  # record NAME KIND STATUS RC MILLISECONDS LIMIT
  printf '{"name": "%s", "kind": "%s", "status": "%s", "rc": %s, "seconds": %s, "limit": %s}\n' "$1" "$2" "$3" \
    "${4:-null}" "$(awk "BEGIN {printf \"%.1f\", $5 / 1000}")" "$6" >>"$work/steps.jsonl"
}

# step NAME BUDGET KIND COMMAND...: COMMAND under min(BUDGET, what the deadline leaves), its output appended live
# to the log and kept as NAME.log; recorded, summarised and packed before and after; one status line.
step() {
  local name=$1 limit=$2 kind=$3
  shift 3
  local override="RLCPP_DEVICE_CHECK_LIMIT_${name^^}"
  limit=${!override:-$limit}
  if [ -n "${RLCPP_DEVICE_CHECK_ONLY:-}" ] && [[ ",$RLCPP_DEVICE_CHECK_ONLY," != *",$name,"* ]]; then
    record "$name" "$kind" not_selected "" 0 "$limit"
    summarize
    return 1
  fi
  local left=$((deadline - $(date +%s) - reserve))
  if ((left < 5)); then
    record "$name" "$kind" skipped_no_time "" 0 "$limit"
    say "$(printf '%-24s skipped: %d s left before the deadline' "$name" $((left + reserve)))"
    summarize
    return 1
  fi
  ((limit > left)) && limit=$left
  [ "${RLCPP_DEVICE_CHECK_STALL:-}" = "$name" ] && set -- sleep 100000
  # the log names the step before the summary calls it running: a call cut off in between still shows both
  echo "===== $name (limit ${limit} s, $(date -u +%T)): $*" >>"$log"
  record "$name" "$kind" running "" 0 "$limit"
  summarize
  local start rc ms status
  start=$(date +%s%N)
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$log" >"$work/$name.log"
  rc=${PIPESTATUS[0]}
  ms=$((($(date +%s%N) - start) / 1000000))
  case $rc in
    0) status=passed ;;
    124 | 137) status=timed_out ;;
    *) status=failed ;;
  esac
  record "$name" "$kind" "$status" "$rc" "$ms" "$limit"
  summarize
  pack
  say "$(printf '%-24s %-9s %6.1f s (limit %d s, %d s left)' "$name" "$status" "$(awk "BEGIN {print $ms / 1000}")" \
    "$limit" $((deadline - $(date +%s))))"
  [ "$status" = passed ]
}
gtest() {  # gtest NAME BUDGET BINARY [FILTER]
  local name=$1 limit=$2 binary=$3 filter=${4:-}
  step "$name" "$limit" gtest "${rl[@]}" CUDA_LAUNCH_BLOCKING=1 RLCPP_GPU_TEST_TIMEOUT_S=10 "$root/bin/$binary" \
    --gtest_output="json:$work/$name.json" ${filter:+--gtest_filter="$filter"}
}
finish() {
  meta finished=1
  summarize --print
  pack
  python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["verdict"] == "pass" else 1)' \
    "$out/device_check.json"
  exit $?
}

smoke_checks() {
  local failed=0
  echo "nvidia-smi: ${gpu_text:-not found or no GPU}"
  for b in "$root"/bin/*; do
    local missing
    missing=$(env LD_LIBRARY_PATH="$lib_path" ldd "$b" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
    [ -n "$missing" ] && { echo "ldd $(basename "$b"): not found: $missing"; failed=1; }
  done
  local require_gpu=--require-gpu
  ((dry_run)) && require_gpu=
  env LD_LIBRARY_PATH="$lib_path" "$rlcpp" devices $require_gpu || failed=1
  env LD_LIBRARY_PATH="$lib_path" CUDA_LAUNCH_BLOCKING=1 "$root/bin/core_exec_context_test" \
    --gtest_output="json:$work/smoke.json" || failed=1
  return $failed
}
export -f smoke_checks
export root rlcpp lib_path work gpu_text dry_run

if [ "$mode" = first ]; then
  if ! step smoke 25 gtest bash -c smoke_checks && ((!dry_run)); then
    say "the basics failed (a GPU, its driver, the libraries or the CUDA context; see the log): nothing else can run"
    finish
  fi
  gtest kernels_cuda_ops 45 kernels_cuda_ops_test
  gtest op_matrix 20 kernels_op_matrix_test
  gtest attention_cuda 40 kernels_attention_test 'CudaAttention.*'
  gtest model_cuda 40 model_cuda_test
  gtest rollout_cuda 45 rollout_cuda_test
  gtest trainer_cuda 45 trainer_cuda_test
  # The whole loop on the GPU from the carried warm start (no SFT here): trainer and a colocated engine on cuda:0,
  # batch-invariant, so the probe holds rollout and trainer log-probs to the same bits; accuracy at 15 and 30.
  grpo=("${rl[@]}" "$rlcpp" train configs/grpo_add3.json --set warm_start.enabled=false
        --set init_checkpoint="$root/warm_start" --set device=cuda --set checkpoint_every=0)
  step grpo_gpu 75 run "${grpo[@]}" --set run_dir="$work/grpo_gpu" --set rollout.placement=colocated \
    --set steps=30 --set eval_every=15 --set eval_size=300
  # Split workers on the trainer's GPU, fed over zmq (the bytes through the host) and cuda-ipc (a device copy from
  # the trainer's export): the same seeded run, so the summary compares their samples and metrics.
  for sync in zmq cuda-ipc; do
    step "split_${sync/-/_}" 35 run "${grpo[@]}" --set run_dir="$work/split_${sync/-/_}" \
      --set rollout.placement=split --set rollout.weight_sync=$sync --set steps=6 --set rollout.prompts_per_step=64 \
      --set eval_every=0
  done
  # The weight-sync and NCCL cases last, one at a time, each with its own limit.
  gtest ipc_same_gpu 25 weightsync_gpu_test '*CudaIpcBetweenProcesses*SameGpu'
  gtest ipc_w2_sync_time 35 weightsync_gpu_test 'CudaIpc.W2SyncTime'
  gtest nccl_world_of_one 15 weightsync_gpu_test 'NcclWeightSync.AWorldOfOneBroadcastsInPlace'
  gtest nccl_join_timeout 20 weightsync_gpu_test 'NcclWeightSync.ARankThatNeverJoinsEndsTheWaitAtTheTimeout'
  gtest trainer_nccl 25 trainer_nccl_test
  if ((gpus >= 2)); then
    gtest ipc_another_gpu 25 weightsync_gpu_test '*CudaIpcBetweenProcesses*AnotherGpu'
    gtest nccl_two_gpus 30 weightsync_gpu_test 'NcclWeightSync.TwoProcessesOnTwoGpusGetTheSameBits'
  fi
else
  # The GPU benchmarks, each beside its peer on the same GPU (the machine's python3): rollout against Hugging Face
  # generate (eager, and a static cache with torch.compile), training against PyTorch (eager and torch.compile,
  # autocast for bf16), the GRPO step against an HF generate + PyTorch update step.
  export RLCPP_PEER_PYTHON=${RLCPP_PEER_PYTHON:-python3}
  bench() {  # bench NAME BUDGET WHAT ARGS...
    local name=$1 limit=$2 what=$3
    shift 3
    step "$name" "$limit" bench "${rl[@]}" "$rlcpp" bench "$what" --device cuda "$@"
  }
  bench rollout_w1_invariant 100 rollout --peers hf --iters 3
  bench rollout_w1_cublas 100 rollout --peers hf --iters 3 --batch-invariant false
  bench rollout_w2_b256_bf16 150 rollout --preset qwen05b --prompts 256 --group 1 --prompt-len 64 --new-tokens 128 \
    --long-tail 0 --dtype bf16 --batch-invariant false --iters 2 --peers hf
  bench rollout_w2_b1_bf16 90 rollout --preset qwen05b --prompts 1 --group 1 --prompt-len 64 --new-tokens 128 \
    --long-tail 0 --dtype bf16 --batch-invariant false --iters 2 --peers hf
  bench train_w1_fp32 50 train --peers pytorch-gpu --iters 10
  bench train_w2_bf16 180 train --preset qwen05b --batch 16 --seq 512 --dtype bf16 --iters 5 --peers pytorch-gpu
  bench step_w1_fp32 40 step --iters 3 --warmup 1
  bench step_w2_bf16 150 step --preset qwen05b --dtype bf16 --new-tokens 128 --iters 2 --warmup 1
fi
finish
