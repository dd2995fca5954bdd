#!/usr/bin/env bash
# The GPU check, on a lent GPU machine (the device tool's `run` with carry [".device"]; README "GPU"):
# unpacks the bundle scripts/device_bundle.sh made here (binaries built for sm_90 with their libraries), finds
# CUDA's libraries on that machine (the toolkit's, or the nvidia-* wheels beside its PyTorch), runs every test
# with a GPU case, and leaves under $OUT each test's gtest JSON and log, gpu.txt (nvidia-smi) and
# device_check.json (the summary), printing a short table last. Ends in a few minutes.
#   here:  scripts/device_bundle.sh
#   there: scripts/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/rlcpp_device_check}
mkdir -p "$out"
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
tests=(core_exec_context_test kernels_ops_test kernels_cuda_ops_test kernels_attention_test model_cuda_test trainer_nccl_test)
for t in "${tests[@]}"; do
  start=$(date +%s%N)
  timeout 180 "$root/bin/$t" --gtest_output="json:$out/$t.json" --gtest_brief=1 >"$out/$t.log" 2>&1
  echo "$? $((($(date +%s%N) - start) / 1000000))" >"$out/$t.rc"
done

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
        entry["skipped"] = [c["classname"] + "." + c["name"] for c in cases if c.get("result") == "SKIPPED"]
    else:
        entry["error"] = open(os.path.join(out, t + ".log")).read()[-2000:]
    summary["tests"][t] = entry
    rows.append((t, entry))
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
    if "error" in e:
        print("  no report; log tail:\n" + e["error"])
# On a GPU machine every GPU case must run: a skip there means the binaries did not see the GPU.
skipped_on_gpu = summary["gpu"] and any(e.get("skipped") for _, e in rows)
if skipped_on_gpu:
    print("device_check: GPU tests skipped on a machine with a GPU (see each test's log for the reason)")
sys.exit(0 if all(e["exit_status"] == 0 for _, e in rows) and not skipped_on_gpu else 1)
EOF
