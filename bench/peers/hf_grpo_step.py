#!/usr/bin/env python3
"""HF+PyTorch GRPO step on a GPU (issue 19's step peer, docs/benchmarks.md: "GRPO step W2"): what a user of
Hugging Face transformers and PyTorch writes for one GRPO step, timed phase by phase, from an rlcpp checkpoint (a
Hugging Face directory). Run with a Python that has torch and transformers (the lent GPU machine's own):

  python3 bench/peers/hf_grpo_step.py step --checkpoint DIR
      [--prompts 64 --group 8 --prompt-len 10 --new-tokens 6 --minibatches 2 --dtype float32|bfloat16
       --device cuda:0 --iters 3 --warmup 1 --lr 1e-4 --clip 0.2 --max-grad-norm 1.0 --seed 0]

Two copies of the model live on the device, as in verl's and OpenRLHF's colocated setups: the policy (fp32 master
weights, fused AdamW; its forward and backward under autocast in --dtype) and the rollout model in --dtype.
A step, each phase ended by a device synchronisation:
  rollout      eager `generate` of the rollout model: --prompts lists of --prompt-len random token ids (seeded,
               ids >= 3, the same every step), --group samples each (num_return_sequences, a prompt's samples
               adjacent), temperature 1, no top-k/top-p, exactly --new-tokens tokens (EOS ignored), as rlcpp's
               `bench step` samples fixed-length responses;
  reward       the hashed stand-in reward of the timing peers (grpo_math.py), walked in Python;
  old_logprob  the policy's log-probs of the responses, no grad, in the mini-batches' chunks;
  update       GRPO (group advantages, PPO-clip, token mean, no KL) in --minibatches mini-batches of whole groups,
               each clipped to --max-grad-norm and an AdamW step (lr, betas 0.9/0.95, eps 1e-8, no decay);
  sync         the weight copy policy -> rollout model (cast to its dtype), verl's "weight sync" when colocated.
The step is their sum; --warmup untimed steps first (allocator, cuBLAS heuristics), then the median of --iters.

Prints ONE JSON object on stdout (human text on stderr): {"peer": "hf-pytorch", "torch", "transformers",
"device", "command": "step", "dtype", "prompts", "group", "sequences", "prompt_len", "new_tokens", "minibatches",
"ms" = "step_ms", "rollout_ms", "reward_ms", "old_logprob_ms", "update_ms", "sync_ms" (medians), each phase's
"_share" (its median over the sum of the medians), "generated_tokens" and "mean_reward" of the last step,
"update_max_abs_change" (the largest change of a policy weight over all steps: the updates ran) and
"rollout_copy_max_abs_diff" (the rollout copy against the policy rounded to its dtype after the last sync: 0)}.
"""

import argparse
import json
import random
import statistics
import sys
import time

PHASES = ("rollout", "reward", "old_logprob", "update", "sync")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def step_peer(args):
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoModelForCausalLM

    from grpo_math import grpo_advantages, hash_reward

    device = torch.device(args.device)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    policy = AutoModelForCausalLM.from_pretrained(args.checkpoint, torch_dtype=torch.float32).to(device).train()
    rollout_model = AutoModelForCausalLM.from_pretrained(args.checkpoint, torch_dtype=dtype).to(device).eval()
    fused = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(policy.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0,
                            **fused)
    autocast = torch.autocast(device_type=device.type, dtype=dtype, enabled=dtype != torch.float32)
    vocab = policy.config.vocab_size
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    prompts = torch.tensor([[rng.randrange(3, vocab) for _ in range(args.prompt_len)] for _ in range(args.prompts)],
                           device=device)
    lp = args.prompt_len
    rows = args.prompts * args.group // args.minibatches  # whole groups: prompts % minibatches == 0

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def response_logp(sequences):
        """(b, Lp + N) -> (b, N) log-probs of the response tokens under the policy."""
        with autocast:
            logits = policy(input_ids=sequences).logits[:, lp - 1:-1]  # position t predicts token t + 1
        logp = F.log_softmax(logits.float(), dim=-1)
        return logp.gather(2, sequences[:, lp:, None])[..., 0]

    def one_step():
        t = {"start": sync()}
        with torch.inference_mode():
            sequences = rollout_model.generate(
                input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=1.0,
                top_k=0, top_p=1.0, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                num_return_sequences=args.group, pad_token_id=0)
        sequences = sequences.clone()  # out of inference mode: the update reads it under autograd
        t["rollout"] = sync()
        rewards = torch.tensor([hash_reward(s) for s in sequences.tolist()], device=device)
        t["reward"] = sync()
        with torch.no_grad():
            old_logp = torch.cat([response_logp(sequences[m * rows:(m + 1) * rows])
                                  for m in range(args.minibatches)])
        t["old_logprob"] = sync()
        adv = grpo_advantages(rewards, args.group)[:, None]  # (B, 1): every token of a sample shares it
        for m in range(args.minibatches):
            sl = slice(m * rows, (m + 1) * rows)
            opt.zero_grad(set_to_none=True)
            ratio = torch.exp(response_logp(sequences[sl]) - old_logp[sl])
            clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
            loss = -torch.min(ratio * adv[sl], clipped * adv[sl]).mean()  # token mean: fixed length, all count
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
            opt.step()
        t["update"] = sync()
        with torch.no_grad():
            for r, p in zip(rollout_model.parameters(), policy.parameters()):
                r.copy_(p)
        t["sync"] = sync()
        ms = {}
        last = t["start"]
        for p in PHASES:
            ms[p + "_ms"], last = (t[p] - last) * 1e3, t[p]
        ms["step_ms"] = (last - t["start"]) * 1e3
        generated = int(sequences.shape[0]) * (int(sequences.shape[1]) - lp)
        return ms, generated, rewards.mean().item()

    start_weights = [p.detach().clone() for p in policy.parameters()]
    steps = []
    for i in range(args.warmup + args.iters):
        ms, generated, mean_reward = one_step()
        log(f"hf_grpo_step {'warm-up' if i < args.warmup else 'timed'} step {i + 1}: {ms['step_ms']:.1f} ms = "
            + ", ".join(f"{p} {ms[p + '_ms']:.1f}" for p in PHASES))
        if i >= args.warmup:
            steps.append(ms)
    out = {"peer": "hf-pytorch", "torch": torch.__version__, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
           "command": "step", "dtype": args.dtype, "prompts": args.prompts, "group": args.group,
           "sequences": args.prompts * args.group, "prompt_len": lp, "new_tokens": args.new_tokens,
           "minibatches": args.minibatches, "iters": args.iters, "warmup": args.warmup}
    for key in ("step_ms",) + tuple(p + "_ms" for p in PHASES):
        out[key] = statistics.median(s[key] for s in steps)
    total = sum(out[p + "_ms"] for p in PHASES)
    for p in PHASES:
        out[p + "_share"] = out[p + "_ms"] / total
    out["ms"] = out["step_ms"]
    with torch.no_grad():  # that the updates moved the policy, and the last sync brought the rollout copy along
        out["update_max_abs_change"] = max((p - w).abs().max().item()
                                           for p, w in zip(policy.parameters(), start_weights))
        out["rollout_copy_max_abs_diff"] = max((r.float() - p.to(r.dtype).float()).abs().max().item()
                                               for r, p in zip(rollout_model.parameters(), policy.parameters()))
    out["generated_tokens"] = generated
    out["mean_reward"] = mean_reward
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["step"])
    p.add_argument("--checkpoint", required=True)
    for name, default in (("prompts", 64), ("group", 8), ("prompt-len", 10), ("new-tokens", 6), ("minibatches", 2),
                          ("iters", 3)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="accepted for the benches' common options; unused")
    args = p.parse_args()
    for key in ("prompts", "group", "prompt_len", "new_tokens", "minibatches", "iters"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
    if args.warmup < 0:
        p.error(f"--warmup {args.warmup}, expected >= 0")
    if args.prompts % args.minibatches:
        p.error(f"--prompts {args.prompts} is not divisible into {args.minibatches} mini-batches of whole groups")
    print(json.dumps(step_peer(args)))


if __name__ == "__main__":
    main()
