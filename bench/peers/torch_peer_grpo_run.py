"""torch_peer.py grpo-run: GRPO on add3 in eager PyTorch from an rlcpp checkpoint, with the held-out accuracy
curve against training wall time. Imported only after torch_peer.py has set the threading environment.

The recipe is docs/benchmarks.md's (and rlcpp's configs/grpo_add3_benchmark.json): P prompts x G samples, temperature
1, at most N new tokens (stop at EOS), advantage (r - group mean) / (group std + 1e-6) (0 for a group whose rewards
are all equal), PPO-clip 0.2, token-mean loss over the mini-batch's response tokens, no KL, M mini-batches of whole
groups in order with an optimizer step each, AdamW (lr 1e-4, betas 0.9/0.95, eps 1e-8, no weight decay), grad clip
1.0. Prompts are the training problems `rlcpp train` draws (run seed, Philox stream 1); the held-out set is rlcpp's
(add3_task.py, checked by tests/reward_peer_task_test.cpp); eval is greedy, at most N new tokens, exact answer then
EOS.

Batches are padded the way a PyTorch user would (Hugging Face's generate does the same): prompts are
left-padded, responses right-padded, each row has its own RoPE positions, and attention masks padding.
Sampling stops when every row has emitted EOS; finished rows are fed PAD until then.

Shapes: B rows, Lp longest prompt, N new tokens, S key slots, V vocab.
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import add3_task
import torch_peer_work
from grpo_math import grpo_advantages
from torch_peer_work import llama_model, log


def padded_forward(model, tokens, positions, key_valid, cache=None, start=0):
    """tokens (B, T) sitting at slots start..start+T-1 with RoPE positions (B, T); key_valid (B, S) marks
    the real tokens among the S = start + T slots -> logits (B, T, V). A query sees the valid slots up to its
    own, and always its own slot (so padding rows get no all-masked softmax and no NaN)."""
    cfg = model.config
    b, t = tokens.shape
    x = model.model.embed_tokens(tokens)
    cos, sin = llama_model.rope_cos_sin(cfg.head_dim, cfg.rope_theta, positions.reshape(-1), x.dtype)
    cos, sin = cos.view(b, 1, t, -1), sin.view(b, 1, t, -1)  # broadcast over heads
    s = start + t
    slots = torch.arange(s)
    query_slots = start + torch.arange(t)
    causal = slots[None, :] <= query_slots[:, None]  # (T, S)
    own = slots[None, :] == query_slots[:, None]
    allowed = ((key_valid[:, None, :] & causal[None]) | own[None])[:, None]  # (B, 1, T, S)
    for i, layer in enumerate(model.model.layers):
        x = x + attend(layer.self_attn, layer.input_layernorm(x), cos, sin, allowed, cache, i, start)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    x = model.model.norm(x)
    if model.lm_head is None:
        return torch.matmul(x, model.model.embed_tokens.weight.t())
    return model.lm_head(x)


def attend(attn, x, cos, sin, allowed, cache, layer, start):
    """The golden model's Attention.forward with per-row RoPE and a padding mask. x (B, T, C)."""
    b, t, _ = x.shape
    q = attn.q_proj(x).view(b, t, attn.hq, attn.d)
    k = attn.k_proj(x).view(b, t, attn.hkv, attn.d)
    if attn.qk_norm:  # Qwen3: q_norm / k_norm on each head, before RoPE
        q, k = attn.q_norm(q), attn.k_norm(k)
    q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, Hq, T, D), (B, Hkv, T, D)
    v = attn.v_proj(x).view(b, t, attn.hkv, attn.d).transpose(1, 2)
    q, k = llama_model.apply_rope(q, cos, sin), llama_model.apply_rope(k, cos, sin)
    if cache is not None:
        cache.k[layer, :, :, start:start + t] = k
        cache.v[layer, :, :, start:start + t] = v
        k = cache.k[layer, :, :, :start + t]
        v = cache.v[layer, :, :, :start + t]
    k, v = llama_model.repeat_kv(k, attn.hq // attn.hkv), llama_model.repeat_kv(v, attn.hq // attn.hkv)
    scores = torch.matmul(q, k.transpose(2, 3)) * attn.d ** -0.5  # (B, Hq, T, S)
    probs = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return attn.o_proj(torch.matmul(probs, v).transpose(1, 2).reshape(b, t, attn.hq * attn.d))


def left_pad(prompts):
    """prompts: B lists of ids -> tokens (B, Lp) left-padded with PAD, valid (B, Lp), positions (B, Lp)
    (0.. on the real tokens, 0 on padding), lengths (B,)."""
    lengths = torch.tensor([len(p) for p in prompts])
    lp = int(lengths.max())
    tokens = torch.full((len(prompts), lp), add3_task.PAD, dtype=torch.int64)
    for i, p in enumerate(prompts):
        tokens[i, lp - len(p):] = torch.tensor(p)
    offset = (lp - lengths)[:, None]
    slots = torch.arange(lp)[None, :]
    return tokens, slots >= offset, (slots - offset).clamp(min=0), lengths


def generate(model, prompts, new_tokens, temperature, gen):
    """Samples (temperature > 0, torch.multinomial) or greedy (argmax: the lowest id on ties) responses of at
    most `new_tokens` tokens to each prompt with a KV cache; a response ends with its EOS. -> B lists of ids."""
    with torch.inference_mode():
        tokens, valid, positions, lengths = left_pad(prompts)
        b, lp = tokens.shape
        key_valid = torch.zeros(b, lp + new_tokens, dtype=torch.bool)
        key_valid[:, :lp] = valid
        cache = llama_model.KVCache(model.config, b, lp + new_tokens)
        logits = padded_forward(model, tokens, positions, key_valid[:, :lp], cache, 0)[:, -1]  # (B, V)
        out = torch.full((b, new_tokens), add3_task.PAD, dtype=torch.int64)
        done = torch.zeros(b, dtype=torch.bool)
        steps = 0
        for i in range(new_tokens):
            if temperature > 0:
                nxt = torch.multinomial(F.softmax(logits / temperature, dim=-1), 1, generator=gen)[:, 0]
            else:
                nxt = torch.argmax(logits, dim=-1)
            nxt = torch.where(done, torch.full_like(nxt, add3_task.PAD), nxt)
            out[:, i] = nxt
            steps = i + 1
            done |= nxt == add3_task.EOS
            if bool(done.all()) or i + 1 == new_tokens:
                break
            key_valid[:, lp + i] = True
            logits = padded_forward(model, nxt[:, None], (lengths + i)[:, None], key_valid[:, :lp + i + 1], cache,
                                    lp + i)[:, -1]
    responses = []
    for row in out[:, :steps].tolist():
        responses.append(row[:row.index(add3_task.EOS) + 1] if add3_task.EOS in row else row)
    return responses


def pack(prompts, responses):
    """Prompts left-padded then responses right-padded: tokens, valid, positions (B, Lp + N), the response
    mask (B, N) and Lp."""
    tokens_p, valid_p, positions_p, lengths = left_pad(prompts)
    n = max(len(r) for r in responses)
    b, lp = tokens_p.shape
    tokens_r = torch.full((b, n), add3_task.PAD, dtype=torch.int64)
    mask = torch.zeros(b, n)
    for i, r in enumerate(responses):
        tokens_r[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
        mask[i, :len(r)] = 1.0
    positions_r = lengths[:, None] + torch.arange(n)[None, :]
    return (torch.cat([tokens_p, tokens_r], 1), torch.cat([valid_p, mask.bool()], 1),
            torch.cat([positions_p, positions_r], 1), mask, lp)


def response_logp(model, batch, rows, temperature):
    """log p (B, N) of each response token under softmax(logits / T), for the rows `rows` of a pack()."""
    tokens, valid, positions, mask, lp = batch
    tokens, valid, positions = tokens[rows], valid[rows], positions[rows]
    logits = padded_forward(model, tokens, positions, valid)[:, lp - 1:-1]  # slot t predicts slot t + 1
    return F.log_softmax(logits / temperature, dim=-1).gather(2, tokens[:, lp:, None])[..., 0]


def evaluate(model, problems, new_tokens):
    """Greedy held-out accuracy (exact answer then EOS) and mean reward."""
    responses = generate(model, [add3_task.encode_prompt(p["prompt"]) for p in problems], new_tokens, 0.0, None)
    scores = [add3_task.score_tokens(p["answer"], r) for p, r in zip(problems, responses)]
    return (sum(1 for _, correct, _ in scores if correct) / len(scores),
            sum(total for total, _, _ in scores) / len(scores))


def grpo_step(args, model, opt, problems, gen):
    """One GRPO step; returns (phase seconds, mean reward, tokens)."""
    t = {"start": time.perf_counter()}
    prompts = [add3_task.encode_prompt(p["prompt"]) for p in problems for _ in range(args.group)]
    responses = generate(model, prompts, args.new_tokens, args.temperature, gen)
    t["rollout"] = time.perf_counter()
    rewards = torch.tensor([add3_task.score_tokens(problems[i // args.group]["answer"], r)[0]
                            for i, r in enumerate(responses)])  # (B,), row i is a sample of prompt i // G
    t["reward"] = time.perf_counter()
    batch = pack(prompts, responses)
    mask = batch[3]
    everyone = slice(0, len(prompts))
    with torch.no_grad():
        old_logp = response_logp(model, batch, everyone, args.temperature)
    t["old_logprob"] = time.perf_counter()
    adv = grpo_advantages(rewards, args.group)[:, None]  # (B, 1)
    rows = len(prompts) // args.minibatches  # whole groups: prompts % minibatches == 0
    for m in range(args.minibatches):
        sl = slice(m * rows, (m + 1) * rows)
        opt.zero_grad(set_to_none=True)
        ratio = torch.exp(response_logp(model, batch, sl, args.temperature) - old_logp[sl])
        clipped = torch.clamp(ratio, 1 - args.clip, 1 + args.clip)
        per_token = -torch.min(ratio * adv[sl], clipped * adv[sl])
        loss = (per_token * mask[sl]).sum() / mask[sl].sum()  # token mean over the mini-batch
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        opt.step()
    t["update"] = time.perf_counter()
    phases, last = {}, t["start"]
    for key in ("rollout", "reward", "old_logprob", "update"):
        phases[key + "_s"], last = t[key] - last, t[key]
    phases["step_s"] = last - t["start"]
    tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses))
    return phases, rewards.mean().item(), tokens


def grpo_run(args, threads):
    """Keys: checkpoint, steps, prompts, group, new_tokens, minibatches, lr, eval_every, eval_size, ms (median
    step ms), step phase medians (<phase>_ms), train_wall_s, final_accuracy, curve (the --out rows)."""
    model = llama_model.load_checkpoint(args.checkpoint)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    data = add3_task.PhiloxStream(args.seed, add3_task.DATA_STREAM)
    held_out = add3_task.eval_set(args.eval_size)
    out_file = open(args.out, "w") if args.out else None
    curve, steps = [], []
    eval_total = 0.0

    def record(step, train_wall, mean_reward):
        nonlocal eval_total
        start = time.perf_counter()
        accuracy, eval_reward = evaluate(model, held_out, args.new_tokens)
        eval_s = time.perf_counter() - start
        eval_total += eval_s
        row = {"step": step, "train_wall_s": train_wall, "accuracy": accuracy, "mean_reward": mean_reward,
               "eval_mean_reward": eval_reward, "eval_s": eval_s}
        curve.append(row)
        if out_file:
            out_file.write(json.dumps(row) + "\n")
            out_file.flush()
        log(f"grpo-run step {step:4d}/{args.steps} | train {train_wall:7.1f} s | held-out {100 * accuracy:5.1f}% "
            f"| reward {mean_reward if mean_reward is not None else float('nan'):.3f} | eval {eval_s:.1f} s")

    record(0, 0.0, None)  # the checkpoint itself, before any training
    start = time.perf_counter()
    eval_total = 0.0
    for step in range(1, args.steps + 1):
        problems = [add3_task.sample_train(data) for _ in range(args.prompts)]
        phases, mean_reward, tokens = grpo_step(args, model, opt, problems, gen)
        steps.append(phases)
        if step % args.log_every == 0 and step % args.eval_every != 0:
            log(f"grpo-run step {step:4d}/{args.steps} | reward {mean_reward:.3f} | step {phases['step_s']:.2f} s "
                f"({tokens / phases['step_s']:.0f} tok/s)")
        if step % args.eval_every == 0 or step == args.steps:
            record(step, time.perf_counter() - start - eval_total, mean_reward)
    if out_file:
        out_file.close()
    out = {"checkpoint": args.checkpoint, "steps": args.steps, "prompts": args.prompts, "group": args.group,
           "new_tokens": args.new_tokens, "minibatches": args.minibatches, "lr": args.lr,
           "eval_every": args.eval_every, "eval_size": len(held_out),
           "train_wall_s": curve[-1]["train_wall_s"], "final_accuracy": curve[-1]["accuracy"], "curve": curve}
    for key in ("step", "rollout", "reward", "old_logprob", "update"):
        out[key + "_ms"] = 1e3 * statistics.median(s[key + "_s"] for s in steps)
    out["ms"] = out["step_ms"]
    return out


def run(args, threads):
    torch.set_num_threads(threads)
    out = {"peer": "pytorch-cpu", "torch": torch.__version__, "command": args.command, "model": "checkpoint",
           "threads": threads, "threads_option": str(threads), "seed": args.seed}
    out.update(grpo_run(args, threads))
    return out
