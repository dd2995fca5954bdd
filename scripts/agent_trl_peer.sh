#!/usr/bin/env bash
# The calc task's GRPO step, rlcpp against TRL's tool-calling GRPOTrainer (issue 34's benchmark), on the same
# Qwen3-shaped model (qwen-tiny, the Qwen3 tokenizer and chat template: tool calls as <tool_call> JSON), from the
# same checkpoint, with the same recipe.
#
#   scripts/agent_trl_peer.sh [--out DIR] [--checkpoint CKPT | --sft-steps 240] [--prompts 4] [--group 8]
#                             [--iters 3] [--warmup 1] [--max-turn-tokens 48] [--peer-threads 2]
#
# 1. The warm start, unless --checkpoint names one: configs/agent_calc.json's SFT on the calculator's expert
#    episodes, every one calling the tool (agent.demo_tool_share 1), on qwen-tiny with the Qwen3 chat protocol
#    (--sft-steps of 16 episodes; 240 take ~15 min on 2 cores): a model that calls the calculator, so that both
#    systems run episodes of two turns (a call, its reply, the answer).
# 2. `rlcpp train configs/agent_calc.json` from it: --prompts x --group episodes a step, at most 2 turns of
#    --max-turn-tokens each, colocated, --warmup + --iters steps; the step time from metrics.jsonl
#    (timing_s/step without eval and checkpoint, the median after the warm-up).
# 3. bench/peers/trl_agent_calc.py from the same checkpoint (build/peers/venv, scripts/install_peers.sh venv):
#    TRL's GRPOTrainer with tools=[calculator], at most 2 turns, the episode's budget 2 x --max-turn-tokens.
# 4. DIR/summary.json and one line: both medians, the ratio, tool calls and tokens per episode on each side.
# The two runs take turns, never together: each uses every core.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python=/usr/bin/python3
peer_python="${RLCPP_PEERS_DIR:-$root/build/peers}/venv/bin/python"

out="runs/agent_trl_peer"
checkpoint=""
sft_steps=240
prompts=4
group=8
iters=3
warmup=1
turn_tokens=48
threads=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --checkpoint) checkpoint="$2"; shift 2 ;;
    --sft-steps) sft_steps="$2"; shift 2 ;;
    --prompts) prompts="$2"; shift 2 ;;
    --group) group="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --max-turn-tokens) turn_tokens="$2"; shift 2 ;;
    --peer-threads) threads="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "agent_trl_peer.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$peer_python" ]] || { echo "agent_trl_peer.sh: no $peer_python: run scripts/install_peers.sh venv" >&2; exit 2; }
if [[ -e "$out" ]]; then
  echo "agent_trl_peer.sh: $out exists; choose another --out (nothing is overwritten)" >&2
  exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rlcpp=("$root/scripts/rlcpp")
recipe="$root/configs/agent_calc.json"
chat=(--set model_preset=qwen-tiny --set "tokenizer=$root/tests/data/qwen3" --set chat.enable_thinking=false
      --set agent.max_turns=2 --set "agent.max_turn_tokens=$turn_tokens"
      --set "rollout.sampling.max_new_tokens=$turn_tokens" --set "rollout.prompts_per_step=$prompts"
      --set "rollout.group_size=$group" --set "ppo.mini_batch_size=$((prompts * group))"
      --set ppo.micro_batch_size=8)

if [[ -z "$checkpoint" ]]; then
  echo "== SFT warm start: $sft_steps steps of 16 calculator episodes (qwen-tiny, Qwen3 chat protocol)"
  "${rlcpp[@]}" train "$recipe" "${chat[@]}" --set warm_start.sft.model_preset=qwen-tiny \
    --set "warm_start.sft.steps=$sft_steps" --set warm_start.sft.batch_size=16 \
    --set warm_start.sft.micro_batch_size=8 --set warm_start.sft.log_every=20 --set warm_start.sft.eval_size=32 \
    --set warm_start.sft.optim.warmup_steps=20 --set agent.demo_tool_share=1.0 --set steps=1 --set eval_every=0 \
    --set eval_size=32 --set checkpoint_every=0 --set "run_dir=$out/warm"
  checkpoint="$(ls -d "$out"/warm/sft/checkpoints/step_* | sort -t_ -k2 -n | tail -1)"
fi
[[ -f "$checkpoint/model.safetensors" ]] || { echo "agent_trl_peer.sh: no model.safetensors in $checkpoint" >&2; exit 1; }
checkpoint="$(cd "$checkpoint" && pwd)"
echo "== checkpoint: $checkpoint"

echo "== rlcpp train: $((warmup + iters)) GRPO steps of $prompts x $group episodes"
"${rlcpp[@]}" train "$recipe" "${chat[@]}" --set warm_start.enabled=false --set "init_checkpoint=$checkpoint" \
  --set "steps=$((warmup + iters))" --set eval_every=0 --set eval_size=1 --set checkpoint_every=0 \
  --set "run_dir=$out/rlcpp"

echo "== TRL GRPOTrainer (tools=[calculator]): $((warmup + iters)) GRPO steps"
"$peer_python" "$root/bench/peers/trl_agent_calc.py" --checkpoint "$checkpoint" --prompts "$prompts" \
  --group "$group" --max-turns 2 --max-completion "$((2 * turn_tokens))" --iters "$iters" --warmup "$warmup" \
  --threads "$threads" > "$out/trl.json"

"$python" - "$out" "$warmup" <<'EOF'
import json, statistics, sys
out, warmup = sys.argv[1], int(sys.argv[2])
records = [json.loads(l) for l in open(f"{out}/rlcpp/metrics.jsonl") if l.strip()]
timed = [r for r in records if r["step"] > warmup]
step = lambda r: r["timing_s/step"] - r.get("timing_s/eval", 0) - r.get("timing_s/checkpoint", 0)
ours = {"median_step_s": statistics.median(step(r) for r in timed),
        "tool_calls_per_episode": statistics.mean(r["agent/tool_calls"] for r in timed),
        "turns_mean": statistics.mean(r["agent/turns_mean"] for r in timed),
        "episode_tokens_mean": statistics.mean(r["rollout/response_length/mean"] for r in timed),
        "steps": [{k: r[k] for k in r if k.startswith(("timing_s/", "agent/", "reward"))} for r in records]}
peer = json.loads(open(f"{out}/trl.json").read().strip().splitlines()[-1])
summary = {"rlcpp": ours, "trl": peer, "trl_over_rlcpp": peer["median_step_s"] / ours["median_step_s"]}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(f"calc GRPO step (median after {warmup}): rlcpp {1e3 * ours['median_step_s']:.0f} ms "
      f"({ours['tool_calls_per_episode']:.2f} tool calls, {ours['turns_mean']:.2f} turns, "
      f"{ours['episode_tokens_mean']:.1f} response tokens an episode), "
      f"TRL {1e3 * peer['median_step_s']:.0f} ms ({peer['tool_calls_per_episode']:.2f} tool calls, "
      f"{peer['completion_tokens_mean']:.1f} completion tokens an episode): TRL / rlcpp "
      f"{summary['trl_over_rlcpp']:.2f}x; {out}/summary.json")
EOF
