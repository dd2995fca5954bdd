#!/usr/bin/env bash
# Soak: a long GRPO run (configs/grpo_add3.json with a remote reward server) under random faults, checked against
# the same run left alone. Not part of CI; its figures go to bench/RESULTS.md.
#   scripts/soak.sh [STEPS]   (default 600 GRPO steps: about 30 minutes under faults on 2 cores, the reward
#                              server's delays and retries taking most of it; the undisturbed run takes ~4 min)
# RLCPP_SOAK_BIN (default build/rlcpp): the binary, e.g. a copy, so that rebuilding meanwhile changes nothing.
# Faults, one every 15-45 s at random (seeded by $RLCPP_SOAK_SEED): SIGKILL of the rollout worker, SIGSTOP of it
# for 15 s (past its heartbeat timeout), SIGKILL of the trainer followed by `rlcpp train --resume`; all the while
# the reward server delays a tenth of its replies past the client's timeout and drops a twentieth.
# Then: every step 1..STEPS is in metrics.jsonl exactly once, samples.jsonl holds each step's samples once and
# equal to the undisturbed run's, and the final weights equal the undisturbed run's bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-600}
bin=${RLCPP_SOAK_BIN:-build/rlcpp}
seed=${RLCPP_SOAK_SEED:-1}
out=${RLCPP_SOAK_DIR:-/tmp/rlcpp_soak}
[ -n "${RLCPP_SOAK_BIN:-}" ] || scripts/ensure_deps.sh rlcpp >/dev/null
rm -rf "$out"
mkdir -p "$out"
RANDOM=$seed

start_server() {  # $1: log file, then server flags; prints the bound endpoint (the pid goes to $1.pid)
  local log=$1
  shift
  /usr/bin/python3 -u scripts/reward_server_example.py --endpoint tcp://127.0.0.1:* "$@" >"$log" 2>&1 &
  echo $! >"$log.pid"
  for _ in $(seq 100); do
    grep -q '^READY' "$log" 2>/dev/null && break
    sleep 0.1
  done
  awk '/^READY/ {print $2; exit}' "$log"
}

run_args() {  # $1: run dir, $2: reward endpoint
  echo configs/grpo_add3.json --set "run_dir=$1" --set "steps=$steps" --set checkpoint_every=20 \
    --set checkpoint_keep_last=3 --set eval_every=100 --set reward.type=remote --set "reward.remote.endpoint=$2" \
    --set reward.remote.timeout_ms=1000 --set reward.remote.retries=20 --set rollout.worker_heartbeat_timeout_s=8
}

echo "soak: $steps steps; reference run first (no faults)" >&2
ref_endpoint=$(start_server "$out/reward_ref.log")
ref_server=$(cat "$out/reward_ref.log.pid")
start=$(date +%s)
"$bin" train $(run_args "$out/reference" "$ref_endpoint") >"$out/reference.log" 2>&1
kill $ref_server
echo "soak: reference done in $(( $(date +%s) - start )) s" >&2

endpoint=$(start_server "$out/reward_chaos.log" --chaos "$seed" --chaos-delay 1.5)
server=$(cat "$out/reward_chaos.log.pid")
start=$(date +%s)
"$bin" train $(run_args "$out/soak" "$endpoint") >>"$out/soak.log" 2>&1 &
trainer=$!
kills=0 stops=0 trainer_kills=0
worker_pid() { pgrep -P "$trainer" -f "rlcpp.* worker" | head -1 || true; }
while kill -0 "$trainer" 2>/dev/null; do
  sleep $(( 15 + RANDOM % 31 ))
  kill -0 "$trainer" 2>/dev/null || break
  case $(( RANDOM % 3 )) in
    0) w=$(worker_pid); [ -n "$w" ] && kill -KILL "$w" 2>/dev/null && kills=$((kills + 1)) && echo "soak: SIGKILL worker $w" >&2 ;;
    1) w=$(worker_pid)
       if [ -n "$w" ] && kill -STOP "$w" 2>/dev/null; then
         stops=$((stops + 1)); echo "soak: SIGSTOP worker $w for 15 s" >&2; sleep 15; kill -CONT "$w" 2>/dev/null || true
       fi ;;
    2) if ls -d "$out"/soak/checkpoints/step_[0-9]* >/dev/null 2>&1; then  # a checkpoint to resume from
         kill -KILL "$trainer" 2>/dev/null || true
         wait "$trainer" 2>/dev/null || true
         trainer_kills=$((trainer_kills + 1))
         echo "soak: SIGKILL trainer; resuming" >&2
         echo "=== resume after SIGKILL $trainer_kills" >>"$out/soak.log"
         "$bin" train --resume "$out/soak" >>"$out/soak.log" 2>&1 &
         trainer=$!
       fi ;;
  esac
done
wait "$trainer" && status=0 || status=$?
kill $server 2>/dev/null || true
minutes=$(( ($(date +%s) - start) / 60 ))
echo "soak: run ended (status $status) after ${minutes} min: $kills worker SIGKILLs, $stops worker SIGSTOPs," \
     "$trainer_kills trainer SIGKILLs; reward server: $(grep -c dropped "$out/reward_chaos.log" || true) dropped," \
     "$(grep -c delaying "$out/reward_chaos.log" || true) delayed replies" >&2
[ "$status" -eq 0 ] || { echo "soak: FAILED: the run did not finish; see $out/soak.log" >&2; tail -20 "$out/soak.log" >&2; exit 1; }

/usr/bin/python3 - "$out" "$steps" <<'PY'
import json, sys, collections
out, steps = sys.argv[1], int(sys.argv[2])
def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]
problems = []
metrics = lines(f"{out}/soak/metrics.jsonl")
seen = collections.Counter(m["step"] for m in metrics)
missing = [s for s in range(1, steps + 1) if seen[s] == 0]
twice = [s for s, c in seen.items() if c > 1]
if missing or twice: problems.append(f"metrics.jsonl: steps missing {missing[:10]}, written twice {twice[:10]}")
ref_samples, samples = lines(f"{out}/reference/samples.jsonl"), lines(f"{out}/soak/samples.jsonl")
if samples != ref_samples:
    problems.append(f"samples.jsonl: {len(samples)} lines, the reference {len(ref_samples)}; equal: False")
ref_metrics = {m["step"]: m for m in lines(f"{out}/reference/metrics.jsonl")}
diff = [m["step"] for m in metrics if abs(m["reward/mean"] - ref_metrics[m["step"]]["reward/mean"]) > 0] if metrics and "reward/mean" in metrics[0] else []
if diff: problems.append(f"reward/mean differs from the reference at steps {diff[:10]}")
a = open(f"{out}/soak/checkpoints/step_{steps}/model.safetensors", "rb").read()
b = open(f"{out}/reference/checkpoints/step_{steps}/model.safetensors", "rb").read()
if a != b: problems.append("final weights differ from the reference run's")
restarts, prev = 0, 0  # rollout/worker_restarts counts within one trainer process
for m in metrics:
    v = m.get("rollout/worker_restarts", 0)
    restarts += v - prev if v >= prev else v
    prev = v
print(f"soak check: {steps} steps, each once: {not missing and not twice}; samples equal the reference: "
      f"{samples == ref_samples}; final weights equal: {a == b}; worker restarts recorded: {restarts:g}")
for p in problems: print("soak: FAILED:", p)
sys.exit(1 if problems else 0)
PY
