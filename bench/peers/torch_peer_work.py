"""The work torch_peer.py times: train steps, a KV-cache decode step, the sampling loop and a GRPO step on
the golden reference's Llama model. Imported only after torch_peer.py has set the threading environment.

Shapes: B sequences, P prompts, G samples per prompt (B = P * G), Lp prompt tokens, N new tokens, V vocab.
"""

import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
import llama_model  # noqa: E402
from grpo_math import grpo_advantages, hash_reward  # noqa: E402


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def timed(fn, iters, warmup):
    """Runs fn warmup + iters times; returns (list of ms of the timed runs, fn's last result)."""
    result = None
    for _ in range(warmup):
        result = fn()
    ms = []
    for _ in range(iters):
        start = time.perf_counter()
        result = fn()
        ms.append((time.perf_counter() - start) * 1e3)
    return ms, result


def summary(prefix, ms):
    return {prefix + "ms": statistics.median(ms), prefix + "ms_min": min(ms), prefix + "ms_all": ms}


def make_model(w1, seed):
    return llama_model.randomize_(llama_model.LlamaForCausalLM(llama_model.LlamaConfig(**w1)), seed)


def train(args, model, gen):
    """fwd + bwd + AdamW on random tokens, token-mean cross entropy over all B * (T - 1) predictions.
    Keys: batch, seq, tokens_per_step (B * T), ms/step_ms (+ _min, _all), tokens_per_s, fwd_bwd_ms (+ _min,
    _all), fwd_bwd_tokens_per_s, loss (last step's, a sanity figure)."""
    v = model.config.vocab_size
    tokens = torch.randint(0, v, (args.batch, args.seq), generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)

    def fwd_bwd():
        opt.zero_grad(set_to_none=True)
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, v), tokens[:, 1:].reshape(-1))
        loss.backward()
        return loss

    def step():
        loss = fwd_bwd()
        opt.step()
        return loss

    step_ms, loss = timed(step, args.iters, args.warmup)
    fb_ms, _ = timed(fwd_bwd, args.iters, 0)  # already warm
    n = args.batch * args.seq
    out = {"batch": args.batch, "seq": args.seq, "tokens_per_step": n, **summary("step_", step_ms),
           **summary("fwd_bwd_", fb_ms), "loss": loss.item()}
    out["ms"] = out["step_ms"]
    out["tokens_per_s"] = n / (out["step_ms"] / 1e3)
    out["fwd_bwd_tokens_per_s"] = n / (out["fwd_bwd_ms"] / 1e3)
    log(f"train {args.batch}x{args.seq}: step {out['step_ms']:.1f} ms ({out['tokens_per_s']:.0f} tok/s), "
        f"fwd+bwd {out['fwd_bwd_ms']:.1f} ms")
    return out


def decode(args, model, gen):
    """One batched decode step at position `context` (keys 0..context), cache prefilled with random tokens.
    Keys: batch, context, ms/step_ms (+ _min, _all), tokens_per_s (B per step)."""
    cfg = model.config
    with torch.inference_mode():
        cache = llama_model.KVCache(cfg, args.batch, args.context + 1)
        model(torch.randint(0, cfg.vocab_size, (args.batch, args.context), generator=gen), cache, 0)
        tok = torch.randint(0, cfg.vocab_size, (args.batch, 1), generator=gen)
        step_ms, _ = timed(lambda: model(tok, cache, args.context), args.iters, args.warmup)
    out = {"batch": args.batch, "context": args.context, **summary("step_", step_ms)}
    out["ms"] = out["step_ms"]
    out["tokens_per_s"] = args.batch / (out["ms"] / 1e3)
    log(f"decode batch {args.batch} context {args.context}: {out['ms']:.2f} ms ({out['tokens_per_s']:.0f} tok/s)")
    return out


def sample_rollout(model, prompts, group, new_tokens, temperature, gen):
    """Prefill every prompt repeated `group` times, then sample `new_tokens` tokens each (fixed length, no
    EOS stop). prompts (P, Lp) -> completions (P * G, N), prefill ms, decode ms."""
    with torch.inference_mode():
        start = time.perf_counter()
        batch = prompts.repeat_interleave(group, dim=0)  # (B, Lp), a prompt's samples adjacent
        lp = batch.shape[1]
        cache = llama_model.KVCache(model.config, batch.shape[0], lp + new_tokens)
        logits = model(batch, cache, 0)[:, -1]  # (B, V)
        prefilled = time.perf_counter()
        out = torch.empty(batch.shape[0], new_tokens, dtype=torch.int64)
        for i in range(new_tokens):
            probs = F.softmax(logits / temperature, dim=-1)
            out[:, i] = torch.multinomial(probs, 1, generator=gen)[:, 0]
            if i + 1 < new_tokens:  # the last token sampled is never fed back
                logits = model(out[:, i:i + 1], cache, lp + i)[:, -1]
        done = time.perf_counter()
    return out.clone(), (prefilled - start) * 1e3, (done - prefilled) * 1e3


def rollout(args, model, gen):
    """Keys: prompts, group, sequences, prompt_len, new_tokens, ms/rollout_ms (+ _min, _all), prefill_ms,
    decode_ms (medians), tokens_per_s (generated tokens B * N per rollout)."""
    prompts = torch.randint(0, model.config.vocab_size, (args.prompts, args.prompt_len), generator=gen)
    parts = []

    def once():
        completions, prefill_ms, decode_ms = sample_rollout(model, prompts, args.group, args.new_tokens,
                                                            args.temperature, gen)
        parts.append((prefill_ms, decode_ms))
        return completions

    ms, _ = timed(once, args.iters, args.warmup)
    parts = parts[args.warmup:]
    b = args.prompts * args.group
    out = {"prompts": args.prompts, "group": args.group, "sequences": b, "prompt_len": args.prompt_len,
           "new_tokens": args.new_tokens, **summary("rollout_", ms),
           "prefill_ms": statistics.median(p for p, _ in parts), "decode_ms": statistics.median(d for _, d in parts)}
    out["ms"] = out["rollout_ms"]
    out["tokens_per_s"] = b * args.new_tokens / (out["ms"] / 1e3)
    log(f"rollout {args.prompts}x{args.group}, {args.new_tokens} new: {out['ms']:.1f} ms "
        f"({out['tokens_per_s']:.0f} tok/s)")
    return out


def completion_logp(model, sequences, prompt_len, temperature):
    """log-probs (B, N) of the completion tokens sequences[:, Lp:] under the model."""
    logits = model(sequences)[:, prompt_len - 1:-1]  # (B, N, V): position t predicts token t + 1
    logp = F.log_softmax(logits / temperature, dim=-1)
    return logp.gather(2, sequences[:, prompt_len:, None])[..., 0]


def grpo_step(args, model, opt, prompts, gen):
    times = {}
    start = time.perf_counter()
    completions, _, _ = sample_rollout(model, prompts, args.group, args.new_tokens, args.temperature, gen)
    sequences = torch.cat([prompts.repeat_interleave(args.group, dim=0), completions], dim=1)  # (B, Lp + N)
    times["rollout_ms"] = time.perf_counter()
    rewards = torch.tensor([hash_reward(s) for s in sequences.tolist()])
    times["reward_ms"] = time.perf_counter()
    with torch.no_grad():
        old_logp = completion_logp(model, sequences, args.prompt_len, args.temperature)  # (B, N)
    times["old_logprob_ms"] = time.perf_counter()
    adv = grpo_advantages(rewards, args.group)[:, None]  # (B, 1): every token of a sample shares it
    rows = sequences.shape[0] // args.minibatches  # whole groups, since prompts % minibatches == 0
    losses = []
    for m in range(args.minibatches):
        sl = slice(m * rows, (m + 1) * rows)
        opt.zero_grad(set_to_none=True)
        ratio = torch.exp(completion_logp(model, sequences[sl], args.prompt_len, args.temperature) - old_logp[sl])
        clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
        loss = -torch.min(ratio * adv[sl], clipped * adv[sl]).mean()  # token mean: fixed length, all count
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        opt.step()
        losses.append(loss.item())
    times["update_ms"] = time.perf_counter()
    ms, last = {}, start
    for key, t in times.items():
        ms[key], last = (t - last) * 1e3, t
    ms["step_ms"] = (last - start) * 1e3
    return ms, rewards.mean().item()


def grpo(args, model, gen):
    """One GRPO step per iteration (BENCHMARKS' add3 recipe with a hashed reward and fixed-length sampling).
    Keys: prompts, group, sequences, prompt_len, new_tokens, minibatches, ms/step_ms, rollout_ms, reward_ms,
    old_logprob_ms, update_ms (medians over iters), rollout_share, reward_share, old_logprob_share,
    update_share (phase median / sum of phase medians), mean_reward."""
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    prompts = torch.randint(0, model.config.vocab_size, (args.prompts, args.prompt_len), generator=gen)
    steps = [grpo_step(args, model, opt, prompts, gen) for _ in range(args.warmup + args.iters)][args.warmup:]
    phases = ("rollout", "reward", "old_logprob", "update")
    out = {"prompts": args.prompts, "group": args.group, "sequences": args.prompts * args.group,
           "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "minibatches": args.minibatches}
    for key in ("step_ms",) + tuple(p + "_ms" for p in phases):
        out[key] = statistics.median(s[key] for s, _ in steps)
    total = sum(out[p + "_ms"] for p in phases)
    for p in phases:
        out[p + "_share"] = out[p + "_ms"] / total
    out["ms"] = out["step_ms"]
    out["mean_reward"] = steps[-1][1]
    log(f"grpo step {args.prompts}x{args.group}, {args.minibatches} mini-batches: {out['ms']:.0f} ms = "
        + ", ".join(f"{p} {100 * out[p + '_share']:.0f} %" for p in phases))
    return out


COMMANDS = {"train": train, "decode": decode, "rollout": rollout, "grpo-step": grpo}


def run(args, w1, threads):
    torch.set_num_threads(threads)
    model = make_model(w1, args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    out = {"peer": "pytorch-cpu", "torch": torch.__version__, "command": args.command, "model": "W1",
           "threads": threads, "threads_option": str(threads), "seed": args.seed,
           "iters": args.iters, "warmup": args.warmup}
    out.update(COMMANDS[args.command](args, model, gen))
    return out
