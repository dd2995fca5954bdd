#!/usr/bin/env bash
# The headline curve: held-out accuracy against GRPO training wall seconds on add3, rlcpp vs a peer (the PyTorch
# peer, or TRL's GRPOTrainer with --peer trl), from the same SFT warm-start checkpoint with the same recipe
# (configs/grpo_add3_benchmark.json, docs/benchmarks.md).
#
#   scripts/headline_curve.sh [--out DIR] [--steps 200] [--eval-every 10] [--eval-size 1000]
#                             [--checkpoint CKPT | --sft-steps N] [--peer torch|trl] [--peer-threads 2]
#                             [--levels 60,70,80,85,90]
#
# 1. SFT warm start once: `rlcpp sft` with the warm_start.sft section of configs/grpo_add3_benchmark.json (--sft-steps
#    overrides its 500 steps), unless --checkpoint names one to start from.
# 2. `rlcpp eval` of that checkpoint (the curves' step 0).
# 3. `rlcpp train configs/grpo_add3_benchmark.json` from it (init_checkpoint, warm start off; split placement, the
#    default), --steps steps, held-out eval every --eval-every steps.
# 4. the peer from the same checkpoint, same steps and eval: `bench/peers/torch_peer.py grpo-run` (Debian's
#    PyTorch), or `bench/peers/trl_grpo.py grpo-run` (TRL, in build/peers/venv of scripts/install_peers.sh).
# 5. scripts/headline_table.py: DIR/rlcpp_curve.jsonl, DIR/peer_curve.jsonl, DIR/table.md (seconds to reach
#    each accuracy level, eval and checkpoints excluded on both sides, and the ratio), DIR/curve.png.
# The two runs take turns, never together: each uses every core.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python=/usr/bin/python3

out="runs/headline_curve"
steps=200
eval_every=10
eval_size=1000
checkpoint=""
sft_steps=""
peer_threads=2
peer=torch
levels="60,70,80,85,90"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --eval-every) eval_every="$2"; shift 2 ;;
    --eval-size) eval_size="$2"; shift 2 ;;
    --checkpoint) checkpoint="$2"; shift 2 ;;
    --sft-steps) sft_steps="$2"; shift 2 ;;
    --peer-threads) peer_threads="$2"; shift 2 ;;
    --peer) peer="$2"; shift 2 ;;
    --levels) levels="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "headline_curve.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -n "$checkpoint" && -n "$sft_steps" ]]; then
  echo "headline_curve.sh: give --checkpoint or --sft-steps, not both" >&2
  exit 2
fi
case "$peer" in
  torch) peer_python=$python peer_script="$root/bench/peers/torch_peer.py" peer_name="PyTorch peer" ;;
  trl) peer_python="${RLCPP_PEERS_DIR:-$root/build/peers}/venv/bin/python"
       peer_script="$root/bench/peers/trl_grpo.py" peer_name="TRL GRPOTrainer"
       [[ -x "$peer_python" ]] || { echo "headline_curve.sh: no $peer_python: run scripts/install_peers.sh" >&2; exit 2; } ;;
  *) echo "headline_curve.sh: --peer '$peer': torch or trl" >&2; exit 2 ;;
esac
if [[ -e "$out" ]]; then
  echo "headline_curve.sh: $out exists; choose another --out (nothing is overwritten)" >&2
  exit 2
fi
rlcpp=("$root/scripts/rlcpp")
mkdir -p "$out"
out="$(cd "$out" && pwd)"
recipe="$root/configs/grpo_add3_benchmark.json"

if [[ -z "$checkpoint" ]]; then
  # The warm-start section of the recipe, as an SFT config of its own.
  "$python" - "$recipe" "$out/sft_config.json" "$out/sft" "$sft_steps" <<'EOF'
import json, sys
recipe, path, run_dir, steps = sys.argv[1:]
sft = json.load(open(recipe))["warm_start"]["sft"]
sft["run_dir"] = run_dir
if steps:
    sft["steps"] = int(steps)
json.dump(sft, open(path, "w"), indent=2)
EOF
  echo "== SFT warm start ($out/sft_config.json)"
  "${rlcpp[@]}" sft "$out/sft_config.json"
  checkpoint="$(ls -d "$out"/sft/checkpoints/step_* | sort -t_ -k2 -n | tail -1)"
fi
[[ -f "$checkpoint/model.safetensors" ]] || { echo "headline_curve.sh: no model.safetensors in $checkpoint" >&2; exit 1; }
checkpoint="$(cd "$checkpoint" && pwd)"
echo "== warm-start checkpoint: $checkpoint"

echo "== rlcpp eval (step 0)"
"${rlcpp[@]}" eval "$checkpoint" --task add3 --n "$eval_size" | tee "$out/rlcpp_start.txt"
tail -1 "$out/rlcpp_start.txt" > "$out/rlcpp_start.json"

echo "== rlcpp train: $steps GRPO steps, eval every $eval_every"
"${rlcpp[@]}" train "$recipe" --set warm_start.enabled=false --set "init_checkpoint=$checkpoint" \
  --set "steps=$steps" --set "eval_every=$eval_every" --set "eval_size=$eval_size" --set checkpoint_every=0 \
  --set "run_dir=$out/rlcpp"

echo "== $peer_name grpo-run: $steps GRPO steps, eval every $eval_every, $peer_threads threads"
"$peer_python" "$peer_script" grpo-run --checkpoint "$checkpoint" --steps "$steps" \
  --eval-every "$eval_every" --eval-size "$eval_size" --threads "$peer_threads" \
  --out "$out/peer_curve.jsonl" > "$out/peer_summary.json"

echo "== table"
"$python" "$root/scripts/headline_table.py" --rlcpp-run "$out/rlcpp" --rlcpp-start "$out/rlcpp_start.json" \
  --peer "$out/peer_curve.jsonl" --peer-summary "$out/peer_summary.json" --peer-name "$peer_name" \
  --out-dir "$out" --levels "$levels"
echo "curves: $out/rlcpp_curve.jsonl $out/peer_curve.jsonl; table: $out/table.md"
