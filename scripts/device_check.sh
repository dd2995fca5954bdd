#!/usr/bin/env bash
# The GPU check, on a lent GPU machine (the device tool's `run` with carry [".device"]; README "GPU check"):
# unpacks the bundle scripts/device_bundle.sh made here (binaries built for sm_90 with their libraries), finds
# CUDA's libraries on that machine (the toolkit's, or the nvidia-* wheels beside its PyTorch), runs every test
# with a GPU case, then the whole loop on the GPU (a short GRPO run, trainer and engine on cuda:0) and the GPU
# benchmarks against Hugging Face generate on the same GPU (the machine's python3). Under $OUT (the device tool
# returns at most 8 files): device_check.json (the summary), device_check.log (every log, in order) and
# logs.tar.xz (each test's gtest JSON and log, nvidia-smi, the run's metrics); a short table is printed last.
# Parts (arguments; default all five): tests (every GPU test binary), loop (GRPO on the GPU; split workers over
# zmq and cuda-ipc, and nccl where there is a second GPU), rollout (rollout benchmarks beside HF generate), train
# (training benchmarks beside the machine's PyTorch), step (a GRPO step beside Hugging Face generate + a PyTorch
# update); each part has its own time limits, so a part that ran long can be run again alone.
#   here:  scripts/device_bundle.sh
#   there: scripts/device_check.sh [tests] [loop] [rollout] [train] [step]
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/rlcpp_device_check}
out=$(mktemp -d)  # the work files; packed into $final at the end
mkdir -p "$final"
bundle=.device/bundle.tar.xz
[ -f "$bundle" ] || { echo "device_check: no $bundle: run scripts/device_bundle.sh first and carry .device" >&2; exit 2; }
root=$(mktemp -d)
tar -C "$root" -xJf "$bundle"
echo "device_check: bundle of commit $(cat "$root/commit")"

cuda_dirs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do [ -d "$d" ] && cuda_dirs+=("$d"); done
while IFS= read -r d; do cuda_dirs+=("$d"); done < <(python3 - <<'EOF' 2>/dev/null
import glob, os, site
for p in site.getsitepackages():
    for d in sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib"))):
        print(d)
EOF
)
LD_LIBRARY_PATH=$root/lib:$(IFS=:; echo "${cuda_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"

missing=""
for b in "$root"/bin/*; do
  m=$(ldd "$b" | awk '/not found/ {print $1}' | tr '\n' ' ')
  [ -n "$m" ] && missing+="$(basename "$b"): $m; "
done
[ -n "$missing" ] && echo "device_check: libraries not found: $missing" | tee "$out/missing_libraries.txt"

export RLCPP_SOURCE_DIR=$PWD OMP_WAIT_POLICY=PASSIVE
parts=" ${*:-tests loop rollout train step} "
part() { [[ $parts == *" $1 "* ]]; }
tests=()
part tests && tests=(core_exec_context_test kernels_ops_test kernels_cuda_ops_test kernels_attention_test
                     model_cuda_test rollout_cuda_test trainer_cuda_test trainer_nccl_test weightsync_gpu_test)
for t in "${tests[@]}"; do
  start=$(date +%s%N)
  timeout 180 "$root/bin/$t" --gtest_output="json:$out/$t.json" --gtest_brief=1 >"$out/$t.log" 2>&1
  echo "$? $((($(date +%s%N) - start) / 1000000))" >"$out/$t.rc"
done

# The whole loop on the GPU: the SFT warm start (CPU), then GRPO with the trainer and a colocated engine on
# cuda:0 (batch-invariant: the probe holds rollout and trainer log-probs to the same bits).
rlcpp="$root/bin/rlcpp"
if part loop; then
start=$(date +%s%N)
timeout 240 "$rlcpp" train configs/grpo_add3.json --set device=cuda --set rollout.placement=colocated \
  --set steps=100 --set eval_every=25 --set eval_size=500 --set run_dir="$out/grpo_gpu" >"$out/grpo_gpu.log" 2>&1
echo "$? $((($(date +%s%N) - start) / 1000000))" >"$out/grpo_gpu.rc"
fi
# Split workers on the trainer's GPU, fed over zmq (the bytes through the host) and over cuda-ipc (a device copy
# from the trainer's exported buffer): the same seeded run must give the same samples and metrics (compared in
# the summary below), and each sync's time is in its metrics. (The W2 sync time is weightsync_gpu_test's.)
train_run() {
  local name=$1 limit=$2
  shift 2
  start=$(date +%s%N)
  timeout "$limit" "$rlcpp" train configs/grpo_add3.json --set warm_start.enabled=false --set device=cuda \
    --set rollout.placement=split --set eval_every=0 --set eval_size=20 --set run_dir="$out/$name" "$@" \
    >"$out/$name.log" 2>&1
  echo "$? $((($(date +%s%N) - start) / 1000000))" >"$out/$name.rc"
}
part loop && for sync in zmq cuda-ipc; do
  train_run "split_${sync/-/_}" 90 --set rollout.weight_sync=$sync --set steps=8 --set rollout.prompts_per_step=64
done
# With a second GPU, nccl too (the worker on cuda:1, a broadcast from the trainer's cuda:0).
if part loop && [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  train_run split_nccl 90 --set rollout.weight_sync=nccl --set rollout.device=cuda:1 --set steps=8 \
    --set rollout.prompts_per_step=64
fi
# The GPU benchmarks, each next to Hugging Face generate (eager, and a static cache with torch.compile) on the
# same GPU: W1 (512 x 8 and the long tail) in fp32, batch-invariant and not; W2 in bf16 (cuBLAS) at batch 256
# and batch 1.
bench() {
  local name=$1 limit=$2 what=$3
  shift 3
  start=$(date +%s%N)
  timeout "$limit" "$rlcpp" bench "$what" --device cuda "$@" >"$out/bench_$name.log" 2>&1
  echo "$? $((($(date +%s%N) - start) / 1000000))" >"$out/bench_$name.rc"
}
if part rollout; then
bench w1_invariant 90 rollout --peers hf --iters 3
bench w1_cublas 60 rollout --peers hf --iters 3 --batch-invariant false
bench w2_b256_bf16 150 rollout --preset qwen05b --prompts 256 --group 1 --prompt-len 64 --new-tokens 128 \
  --long-tail 0 --dtype bf16 --batch-invariant false --iters 2 --peers hf
bench w2_b1_bf16 90 rollout --preset qwen05b --prompts 1 --group 1 --prompt-len 64 --new-tokens 128 --long-tail 0 \
  --dtype bf16 --batch-invariant false --iters 2 --peers hf
fi
# The training benchmarks beside the machine's PyTorch (eager and torch.compile) on the same GPU: W1 fp32
# (512 x 18) and W2 bf16 (16 x 512; PyTorch under autocast).
if part train; then
bench train_w1_fp32 120 train --peers pytorch-gpu --iters 10
bench train_w2_bf16 240 train --preset qwen05b --batch 16 --seq 512 --dtype bf16 --iters 5 --peers pytorch-gpu
fi
# A GRPO step on the GPU, split (the worker sharing the GPU over cuda-ipc) and colocated, beside the Hugging Face
# + PyTorch step on the same GPU (bench/peers/hf_grpo_step.py, the machine's python3): W1 fp32 (the add3 recipe)
# and W2 bf16 (64 x 8, 128 new tokens, 2 mini-batches).
if part step; then
bench step_w1_fp32 150 step --iters 3 --warmup 1
bench step_w2_bf16 300 step --preset qwen05b --dtype bf16 --new-tokens 128 --iters 2 --warmup 1
fi

python3 - "$out" "${tests[@]}" <<'EOF'
import json, os, sys
out, tests = sys.argv[1], sys.argv[2:]
rows, summary = [], {"gpu": open(os.path.join(out, "gpu.txt")).read().strip(), "tests": {}}
for t in tests:
    rc, ms = open(os.path.join(out, t + ".rc")).read().split()
    entry = {"exit_status": int(rc), "seconds": round(int(ms) / 1000, 1)}
    path = os.path.join(out, t + ".json")
    if os.path.exists(path):
        report = json.load(open(path))
        cases = [c for s in report.get("testsuites", []) for c in s.get("testsuite", [])]
        entry["passed"] = sum(1 for c in cases if c.get("result") == "COMPLETED" and not c.get("failures"))
        entry["failed"] = [c["classname"] + "." + c["name"] for c in cases if c.get("failures")]
        # CudaIpcSubscriberProcess: the other process of weightsync_gpu_test, run only by it.
        skipped = [c["classname"] + "." + c["name"] for c in cases if c.get("result") == "SKIPPED"
                   and c["classname"] != "CudaIpcSubscriberProcess"]
        # The cases of a second GPU (named .../AnotherGpu or ...TwoGpus...) skip on a machine with one: reported,
        # not failed.
        gpus = len([l for l in summary["gpu"].splitlines() if l.strip()])
        entry["needs_more_gpus"] = [n for n in skipped if (n.endswith("/AnotherGpu") or "TwoGpus" in n) and gpus < 2]
        entry["skipped"] = [n for n in skipped if n not in entry["needs_more_gpus"]]
    else:
        entry["error"] = open(os.path.join(out, t + ".log")).read()[-2000:]
    summary["tests"][t] = entry
    rows.append((t, entry))
runs = {}
for name in sorted(f[:-3] for f in os.listdir(out) if f.endswith(".rc") and f[:-3] not in tests):
    rc, ms = open(os.path.join(out, name + ".rc")).read().split()
    log = open(os.path.join(out, name + ".log"), errors="replace").read()
    runs[name] = {"exit_status": int(rc), "seconds": round(int(ms) / 1000, 1), "tail": log[-3000:]}
summary["runs"] = runs
metrics = os.path.join(out, "grpo_gpu", "metrics.jsonl")
if os.path.exists(metrics):
    summary["grpo_gpu_evals"] = [{k: v for k, v in json.loads(l).items()
                                  if k in ("step", "eval/accuracy", "step_s", "probe/max_abs_dlogp")}
                                 for l in open(metrics) if "eval/accuracy" in l]
def records(run, name):
    path = os.path.join(out, run, name)
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []
def same_run(a, b):  # samples, and every metric but the run-dependent ones (timing, engine, memory, layout)
    skip = ("timing", "elapsed_s", "tokens_per_s", "checkpoint", "engine/", "memory/", "layout/")
    ma, mb = records(a, "metrics.jsonl"), records(b, "metrics.jsonl")
    return bool(ma) and records(a, "samples.jsonl") == records(b, "samples.jsonl") and len(ma) == len(mb) and all(
        {k: v for k, v in x.items() if not k.startswith(skip)} == {k: v for k, v in y.items() if not k.startswith(skip)}
        for x, y in zip(ma, mb))
summary["weight_sync"] = {}
for run in ("split_zmq", "split_cuda_ipc", "split_nccl"):
    ms = [m["timing_s/weight_sync"] for m in records(run, "metrics.jsonl") if "timing_s/weight_sync" in m]
    if ms:
        summary["weight_sync"][run] = {"sync_ms": [round(1000 * x, 2) for x in ms],
                                       "probe_max_abs_dlogp": [m.get("probe/max_abs_dlogp")
                                                               for m in records(run, "metrics.jsonl")]}
if os.path.exists(os.path.join(out, "split_zmq.rc")):
    summary["weight_sync"]["split_cuda_ipc_equals_zmq"] = same_run("split_zmq", "split_cuda_ipc")
if os.path.exists(os.path.join(out, "split_nccl.rc")):
    summary["weight_sync"]["split_nccl_equals_zmq"] = same_run("split_zmq", "split_nccl")
ipc_log = os.path.join(out, "weightsync_gpu_test.log")
w2 = [l.strip() for l in open(ipc_log, errors="replace") if l.startswith("cuda-ipc W2 sync")] if os.path.exists(ipc_log) else []
if os.path.exists(ipc_log):
    summary["weight_sync"]["w2_cuda_ipc"] = w2[0] if w2 else None
json.dump(summary, open(os.path.join(out, "device_check.json"), "w"), indent=1)
print(f"\nGPU: {summary['gpu']}")
print(f"{'test binary':28} {'exit':>4} {'s':>6} {'passed':>6} {'failed':>6} {'skipped':>7}")
for t, e in rows:
    print(f"{t:28} {e['exit_status']:>4} {e['seconds']:>6} {e.get('passed', '-'):>6} "
          f"{len(e.get('failed', [])) if 'failed' in e else '-':>6} {len(e.get('skipped', [])) if 'skipped' in e else '-':>7}")
    for name in e.get("failed", []):
        print(f"  FAILED  {name}")
    for name in e.get("skipped", []):
        print(f"  skipped {name}")
    for name in e.get("needs_more_gpus", []):
        print(f"  needs a second GPU: {name}")
    if "error" in e:
        print("  no report; log tail:\n" + e["error"])
for name, r in runs.items():
    print(f"{name:28} {r['exit_status']:>4} {r['seconds']:>6}")
for e in summary.get("grpo_gpu_evals", []):
    print("  grpo_gpu", e)
for name, e in summary["weight_sync"].items():
    print("  weight_sync", name, e)
# On a GPU machine every GPU case must run: a skip there means the binaries did not see the GPU.
skipped_on_gpu = bool(summary["gpu"]) and any(e.get("skipped") for _, e in rows)
if skipped_on_gpu:
    print("device_check: GPU tests skipped on a machine with a GPU (see each test's log for the reason)")
sys.exit(0 if all(e["exit_status"] == 0 for _, e in rows) and not skipped_on_gpu and
         all(r["exit_status"] == 0 for r in runs.values()) and
         summary["weight_sync"].get("split_cuda_ipc_equals_zmq", True) and
         summary["weight_sync"].get("split_nccl_equals_zmq", True) else 1)
EOF
status=$?
# What comes back (at most 8 files): the summary, every log in one file, and the work files packed.
cp "$out/device_check.json" "$final/" 2>/dev/null
for f in "$out"/gpu.txt "$out"/*.log; do [ -f "$f" ] && { echo "===== $(basename "$f")"; tail -c 200000 "$f"; }; done \
  >"$final/device_check.log"
tar -C "$out" -cJf "$final/logs.tar.xz" --exclude=checkpoints . 2>/dev/null
exit $status
