#!/usr/bin/env bash
# Checks the scaling model (`rlcpp scale`, docs/scaling.md) on this machine: measures the W1 GRPO step
# (configs/grpo_add3_benchmark.json's RL part from a random tiny model, fixed-length responses, split placement)
# on 1 and 2 rollout workers x 1 and 2 trainer ranks (mpirun; one OpenMP thread a rank when there are two), then
# prints the model's predictions from the 1 x 1 run against what the other three measured.
#   scripts/scaling_check.sh [OUT_DIR]        (default runs/scaling_check; STEPS=8 steps a run, the first skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/scaling_check}
steps=${STEPS:-8}
rlcpp=build/rlcpp
[ -x "$rlcpp" ] || scripts/ensure_deps.sh rlcpp
rm -rf "$out"
mkdir -p "$out"
common=(configs/grpo_add3_benchmark.json --set warm_start.enabled=false --set rollout.sampling.ignore_eos=true
        --set steps="$steps" --set eval_every=0 --set eval_size=1 --set checkpoint_every=0 --set log_every="$steps")
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np 2)
for workers in 1 2; do
  echo "scaling check: $workers worker(s), 1 rank"
  "$rlcpp" train "${common[@]}" --set rollout.num_workers="$workers" --set run_dir="$out/w${workers}_r1" > "$out/w${workers}_r1.log"
  echo "scaling check: $workers worker(s), 2 ranks"
  "${mpirun[@]}" "$rlcpp" train "${common[@]}" --set rollout.num_workers="$workers" --set run_dir="$out/w${workers}_r2" \
    > "$out/w${workers}_r2.log"
done
"$rlcpp" scale "$out/w1_r1" --check "$out/w2_r1" "$out/w1_r2" "$out/w2_r2" --workers 1,2,4,8,16,32 --ranks 1,2,4,8
