#!/usr/bin/env python3
"""TRL peer of issue 34's benchmark (bench/RESULTS.md "Agents"): Hugging Face TRL's tool-calling `GRPOTrainer`
(`tools=[calculator]`) on rlcpp's `calc` task, from an rlcpp checkpoint of a Qwen3-shaped model with the Qwen3
tokenizer (config.json + model.safetensors + tokenizer.json, loaded as transformers' Qwen3ForCausalLM). Run it
with the peers' venv (scripts/install_peers.sh venv), or through scripts/agent_trl_peer.sh, which runs rlcpp on
the same checkpoint and recipe beside it:

  build/peers/venv/bin/python bench/peers/trl_agent_calc.py --checkpoint DIR
      [--prompts 4 --group 8 --max-turns 2 --max-completion 96 --iters 3 --warmup 1 --threads 2 --seed 1
       --lr 5e-4 --temperature 1.0]

It prints human text on stderr and ONE JSON object as the last line of stdout: the wall time of each GRPO step
(one generation batch of prompts x group episodes and one optimizer step), the median after --warmup, and TRL's
logged tool calls per episode, tool failure share, completion lengths and reward.

The task as rlcpp's `calc` environment writes it (agent/toy_envs.cpp, agent/tools.cpp): the user turn is the
problem ("123*456="), the one tool is `calculator(expression)` with rlcpp's description, listed in the system turn
by the Qwen3 chat template (thinking off: the template's empty think block); a call is
`<tool_call>{"name": "calculator", "arguments": {"expression": ...}}</tool_call>` and its reply a
`<tool_response>` user turn; the episode's reward is rlcpp's format scorer on the last assistant turn's text (1 the
product, 0.1 another integer, 0 else; an episode cut by the token budget scores 0). Problems: 3-digit x 3-digit
products, each operand's length uniform in 1..3 (rlcpp's "length-balanced"), from Python's random seeded with
--seed (rlcpp draws them from its Philox stream: the same distribution, other problems).

How the recipe maps onto TRL 1.16 (GRPOConfig), as bench/peers/trl_grpo.py does for the main task:
  P prompts x G samples    num_generations=G, per_device_train_batch_size=P*G, one mini-batch, num_iterations=1
  turns                    max_tool_calling_iterations = --max-turns - 1 (a call, then the answer)
  token budget             max_completion_length = --max-completion: the episode's tokens, tool replies included
                           (TRL has no per-turn limit: each turn may sample up to what is left)
  advantage, loss, AdamW   scale_rewards="group", loss_type="bnpo", epsilon 0.2, beta 0, adamw_torch (0.9, 0.95),
                           constant lr, max_grad_norm 1.0
  the chat template        TRL's copy of Qwen3's (the fixture's, one revision later: the same text for these
                           conversations), which TRL swaps for its prefix-preserving training variant in
                           multi-turn runs; tool calls parsed by TRL's Qwen3 response template
  no vLLM (transformers' generate: each turn re-prefills the whole conversation), use_cpu, fp32
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from fractions import Fraction

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # idle OpenMP threads sleep, not spin (see torch_peer.py)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="rlcpp checkpoint directory of a Qwen3-shaped model")
    for key, value in dict(prompts=4, group=8, max_turns=2, max_completion=96, iters=3, warmup=1, threads=2, seed=1,
                           lr=5e-4, temperature=1.0).items():
        p.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    args = p.parse_args(argv)
    for key in ("prompts", "max_turns", "max_completion", "iters", "threads"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
    if args.group < 2:
        p.error("GRPO needs --group >= 2")
    if args.warmup < 0 or args.temperature <= 0:
        p.error("--warmup must be >= 0 and --temperature > 0")
    return args


def calculator(expression: str):
    """Evaluate an arithmetic expression of integers with + - * / and parentheses, exactly.

    Args:
        expression: e.g. 123*456
    """
    if not expression or any(c not in "0123456789+-*/() " for c in expression):
        raise ValueError(f"not an expression of integers: {expression!r}")
    value = eval(expression.replace("/", "*Fraction(1)/"), {"__builtins__": {}, "Fraction": Fraction})  # noqa: S307
    value = Fraction(value)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def draw_operand(rng):
    length = rng.randint(1, 3)
    return rng.randrange(0, 10) if length == 1 else rng.randrange(10 ** (length - 1), 10 ** length)


def canonical_integer(text):
    return text.isdigit() and (text == "0" or not text.startswith("0"))


class CalcReward:
    """rlcpp's format scorer on the last assistant turn of each episode; keeps the last batch's figures."""

    __name__ = "calc_reward"

    def __init__(self, eos_id):
        self.eos_id = eos_id
        self.last = {}

    def __call__(self, prompts, completions, completion_ids, answer, **kwargs):
        rewards, correct = [], 0
        for messages, ids, want in zip(completions, completion_ids, answer):
            text = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), "")
            text = text.split("</think>")[-1].strip()
            ended = len(ids) > 0 and ids[-1] == self.eos_id
            ok = ended and text == want
            correct += ok
            rewards.append(1.0 if ok else 0.1 if ended and canonical_integer(text) else 0.0)
        self.last = {"correct_share": correct / len(rewards), "example": [m for m in completions[0]]}
        return rewards


def run(args):
    import torch

    torch.set_num_threads(args.threads)
    import datasets
    import transformers
    import trl
    from transformers import AutoTokenizer, PrinterCallback, ProgressCallback, Qwen3ForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template, qwen3_template

    transformers.logging.set_verbosity_warning()
    datasets.disable_progress_bars()
    steps = args.warmup + args.iters
    rng = random.Random(args.seed)
    rows = []
    for _ in range(steps * args.prompts):
        a, b = draw_operand(rng), draw_operand(rng)
        rows.append({"prompt": [{"role": "user", "content": f"{a}*{b}="}], "answer": str(a * b)})
    dataset = datasets.Dataset.from_list(rows)
    tok = AutoTokenizer.from_pretrained(args.checkpoint)
    tok.chat_template = qwen3_chat_template
    tok.response_template = qwen3_template
    model = Qwen3ForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32)
    reward = CalcReward(tok.eos_token_id)

    class StepClock(TrainerCallback):
        def __init__(self):
            self.steps = []
            self.begin = None

        def on_step_begin(self, targs, state, control, **kwargs):
            if self.begin is None:
                self.begin = time.perf_counter()

        def on_log(self, targs, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs:
                return
            end = time.perf_counter()
            row = {"wall_s": end - self.begin, "reward": logs["reward"],
                   "tool_calls": logs.get("tools/call_frequency"), "tool_failures": logs.get("tools/failure_frequency"),
                   "completion_tokens": logs.get("completions/mean_length"), "correct": reward.last["correct_share"]}
            self.steps.append(row)
            log(f"TRL GRPO step {len(self.steps)}/{steps}: {1e3 * row['wall_s']:.0f} ms | reward {row['reward']:.3f} "
                f"| correct {row['correct']:.2f} | tool calls/episode {row['tool_calls']} | failures "
                f"{row['tool_failures']} | completion tokens {row['completion_tokens']}")
            self.begin = time.perf_counter()

    clock = StepClock()
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl_agent_calc_"), use_cpu=True, bf16=False, fp16=False,
        report_to="none", save_strategy="no", logging_strategy="steps", logging_steps=1, disable_tqdm=True,
        seed=args.seed, data_seed=args.seed, max_steps=steps, num_train_epochs=1,
        per_device_train_batch_size=args.prompts * args.group, gradient_accumulation_steps=1, steps_per_generation=1,
        num_iterations=1, num_generations=args.group, max_completion_length=args.max_completion,
        max_tool_calling_iterations=args.max_turns - 1, chat_template_kwargs={"enable_thinking": False},
        temperature=args.temperature, top_p=1.0, top_k=0, scale_rewards="group", loss_type="bnpo", epsilon=0.2,
        beta=0.0, learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, optim="adamw_torch",
        adam_beta1=0.9, adam_beta2=0.95, adam_epsilon=1e-8, weight_decay=0.0, max_grad_norm=1.0,
        activation_checkpointing=False, shuffle_dataset=False, use_vllm=False, log_completions=False,
        dataloader_pin_memory=False, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=dataset,
                          processing_class=tok, tools=[calculator], callbacks=[clock])
    for cb in (PrinterCallback, ProgressCallback):  # they print logs on stdout
        trainer.remove_callback(cb)
    torch.set_num_threads(args.threads)
    log(f"trl {trl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; {args.checkpoint}; {args.prompts} x {args.group} episodes, at most "
        f"{args.max_turns} turns and {args.max_completion} completion tokens; {steps} GRPO steps")
    trainer.train()
    if len(clock.steps) != steps:
        raise SystemExit(f"trl_agent_calc: TRL logged {len(clock.steps)} GRPO steps, expected {steps}")
    timed = clock.steps[args.warmup:]
    log("an episode of the last step: " + json.dumps(reward.last["example"])[:600])
    print(json.dumps({
        "peer": "trl", "trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
        "threads": torch.get_num_threads(), "checkpoint": args.checkpoint, "prompts": args.prompts,
        "group": args.group, "max_turns": args.max_turns, "max_completion": args.max_completion,
        "median_step_s": statistics.median(s["wall_s"] for s in timed),
        "tool_calls_per_episode": statistics.mean(s["tool_calls"] or 0.0 for s in timed),
        "completion_tokens_mean": statistics.mean(s["completion_tokens"] or 0.0 for s in timed),
        "steps": clock.steps}))


if __name__ == "__main__":
    run(parse_args(sys.argv[1:]))
