#!/usr/bin/python3
"""Golden values for tests/trainer_losses_test.cpp, computed with PyTorch autograd.

An independent implementation of the trainer/ losses and advantages: it works on padded (B, L) tensors as
verl's core_algos.py does (the C++ works on flattened sequences with offsets), in float64, and takes every
gradient from autograd, so the C++ derivatives (including the subgradients at clips and ties) are checked
against torch's own. Inputs are float32 values (the C++ reads them as float).

    /usr/bin/python3 tests/golden/losses_golden.py [OUT.json]    (default: next to this script)

Deterministic: each case draws from its own seeded generator. Regenerate and commit the JSON when a formula
changes; the C++ test also reruns this script when torch is importable and checks against the fresh file.
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

DT = torch.float64
AGGS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
TOKEN_SUM_NORM = 16.0  # the seq-mean-token-sum-norm constant used by the cases (>= every length below)
LENGTHS = [5, 0, 1, 9, 3, 12, 7]  # includes an empty and a one-token response


# ---------------------------------------------------------------- inputs
def f32(t):
    """Rounds to float32 (what the C++ reads) and computes in float64."""
    return t.to(torch.float32).to(DT)


class Batch:
    def __init__(self, lengths, gen, hole_prob=0.15, masked_seq=None):
        self.lengths = list(lengths)
        self.cu = [0]
        for n in lengths:
            self.cu.append(self.cu[-1] + n)
        self.B = len(lengths)
        self.L = max(lengths) if lengths else 0
        self.T = self.cu[-1]
        mask = (torch.rand(self.T, generator=gen, dtype=DT) >= hole_prob).to(DT)
        if masked_seq is not None:  # one sequence entirely masked out (e.g. a tool output only)
            mask[self.cu[masked_seq]:self.cu[masked_seq + 1]] = 0
        self.mask_flat = mask
        self.mask = self.pad(mask)

    def pad(self, flat):
        out = torch.zeros(self.B, self.L, dtype=DT)
        for i in range(self.B):
            out[i, : self.lengths[i]] = flat[self.cu[i]: self.cu[i + 1]]
        return out

    def unpad(self, padded):
        parts = [padded[i, : self.lengths[i]] for i in range(self.B)]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=DT)


def vec(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def rand_normal(gen, n, scale=1.0, shift=0.0):
    return f32(torch.randn(n, generator=gen, dtype=DT) * scale + shift)


def rand_uniform(gen, n, lo, hi):
    return f32(torch.rand(n, generator=gen, dtype=DT) * (hi - lo) + lo)


# ---------------------------------------------------------------- verl formulas (padded)
def masked_mean(x, mask):
    s = mask.sum()
    return (x * mask).sum() / s if s > 0 else (x * mask).sum() * 0.0


def agg_loss(loss_mat, mask, mode, token_sum_norm=TOKEN_SUM_NORM):
    """verl agg_loss with the global batch's counts (this batch is the global batch)."""
    if mode == "token-mean":
        n = mask.sum()
        return (loss_mat * mask).sum() / n if n > 0 else (loss_mat * mask).sum() * 0.0
    seq_count = mask.sum(dim=-1)
    seq_mask = (seq_count > 0).to(DT)
    num_seqs = seq_mask.sum()
    seq_losses = (loss_mat * mask).sum(dim=-1)
    if mode == "seq-mean-token-mean":
        seq_losses = seq_losses / torch.where(seq_count > 0, seq_count, torch.ones_like(seq_count))
    if num_seqs == 0:
        return seq_losses.sum() * 0.0
    loss = (seq_losses * seq_mask).sum() / num_seqs
    if mode == "seq-mean-token-sum-norm":
        loss = loss / token_sum_norm
    return loss


def kl_penalty(logp, ref, estimator):
    if estimator in ("k1", "kl"):
        return logp - ref
    if estimator in ("k2", "mse"):
        return 0.5 * (logp - ref).square()
    if estimator in ("k3", "low_var_kl"):
        kl = torch.clamp(ref - logp, min=-20, max=20)
        return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)
    raise ValueError(estimator)


SAFETY_BOUND = 20.0  # verl's bound on a log-ratio before exp (rollout_corr_helper.py)


def bounded_exp(x):
    return torch.exp(torch.clamp(x, min=-SAFETY_BOUND, max=SAFETY_BOUND))


def rollout_correction(old, rollout, mask, rc):
    """verl's rollout_is weights and rollout_rs mask, and IcePop's M(k); padded (B, L); returns factor, keep,
    the per-sequence keep (B,) and the share of IS weights at their cap. Constants (detached)."""
    log_ratio = old - rollout
    seq_log_ratio = (log_ratio * mask).sum(dim=-1, keepdim=True)
    seq_count = mask.sum(dim=-1, keepdim=True)
    weight = torch.ones_like(log_ratio)
    capped = torch.zeros_like(log_ratio)
    thr = rc.get("is_threshold", 2.0)
    if rc.get("is", "none") == "token":
        raw = bounded_exp(log_ratio)
        weight, capped = torch.clamp(raw, max=thr), (raw > thr).to(DT)
    elif rc.get("is", "none") == "sequence":
        raw = bounded_exp(seq_log_ratio).expand_as(log_ratio)
        weight, capped = torch.clamp(raw, max=thr), (raw > thr).to(DT)
    seq_keep = torch.ones(log_ratio.shape[0], 1, dtype=DT)
    keep = torch.ones_like(log_ratio)
    lo, hi = rc.get("mask_low", 0.5), rc.get("mask_high", 2.0)
    mode = rc.get("mask", "none")
    if mode == "token":
        rho = bounded_exp(log_ratio)
        keep = keep * ((rho >= lo) & (rho <= hi)).to(DT)
    elif mode in ("sequence", "geometric"):
        agg = seq_log_ratio if mode == "sequence" else torch.where(seq_count > 0, seq_log_ratio / seq_count,
                                                                   torch.zeros_like(seq_count))
        rho = bounded_exp(agg)
        seq_keep = ((rho >= lo) & (rho <= hi)).to(DT)
        keep = keep * seq_keep.expand_as(log_ratio)
    if rc.get("icepop", False):
        rho = bounded_exp(log_ratio)
        weight = rho
        keep = keep * ((rho >= rc.get("icepop_low", 0.5)) & (rho <= rc.get("icepop_high", 2.0))).to(DT)
    return (weight * keep).detach(), keep, seq_keep.squeeze(-1), float(masked_mean(capped, mask))


def masked_whiten(values, mask):
    mean = masked_mean(values, mask)
    count = mask.sum()
    var = masked_mean((values - mean) ** 2, mask)
    var = var * count / (count - 1) if count > 1 else var * 0.0
    return (values - mean) * torch.rsqrt(var + 1e-8)


# ---------------------------------------------------------------- cases
def policy_case(name, seed, cfg, lengths=LENGTHS, log_ratio_scale=0.15, with_ref=False, with_entropy=False,
                with_rollout=False, every_clipped=None, masked_seq=None, ref_scale=0.3, hole_prob=0.15,
                require_partial=(), rollout_scale=0.3):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(lengths, gen, hole_prob=hole_prob, masked_seq=masked_seq)
    T = b.T
    logp = rand_uniform(gen, T, -3.0, -0.05)
    adv = rand_normal(gen, T)
    if every_clipped == "high":  # |log ratio| in [0.5, 1.5] with the sign of A: l2 > l1 on every token
        old = f32(logp - torch.sign(adv) * rand_uniform(gen, T, 0.5, 1.5))
    elif every_clipped == "dual":  # A < 0 and ratio > e^1.5 > clip_c = 3: the dual clip binds on every token
        adv = -adv.abs() - 0.1
        old = f32(logp - rand_uniform(gen, T, 1.5, 2.5))
    else:
        old = f32(logp + rand_normal(gen, T, log_ratio_scale))
    ref = f32(logp + rand_normal(gen, T, ref_scale)) if with_ref else None
    entropy = rand_uniform(gen, T, 0.0, 3.0) if with_entropy else None
    rollout = f32(old + rand_normal(gen, T, rollout_scale)) if with_rollout else None

    logp_p = b.pad(logp).requires_grad_(True)
    old_p, adv_p, mask = b.pad(old), b.pad(adv), b.mask
    ent_p = b.pad(entropy).requires_grad_(True) if with_entropy else None

    lo, hi, c = cfg["clip_low"], cfg["clip_high"], cfg.get("clip_c", 0.0)
    loss_mode = cfg.get("loss_mode", "vanilla")
    negative_approx_kl = torch.clamp(logp_p - old_p, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, mask)
    if loss_mode == "gspo":  # verl compute_policy_loss_gspo: the sequence ratio, straight-through per token
        seq_lengths = mask.sum(dim=-1).clamp(min=1.0)
        seq_log_ratio = ((logp_p - old_p) * mask).sum(dim=-1) / seq_lengths
        log_s = logp_p - logp_p.detach() + seq_log_ratio.detach().unsqueeze(-1)
        ratio = torch.exp(torch.clamp(log_s, max=10.0))
    if loss_mode == "cispo":  # MiniMax-M1: -sg(clip(r)) A logp
        weight = torch.clamp(ratio, 1 - lo, 1 + hi).detach()
        clip_pg_losses1 = -adv_p * weight * logp_p
        pg_clipfrac = masked_mean(((ratio < 1 - lo) | (ratio > 1 + hi)).to(DT), mask)
    else:
        pg_losses1 = -adv_p * ratio
        pg_losses2 = -adv_p * torch.clamp(ratio, 1 - lo, 1 + hi)
        clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
        pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).to(DT), mask)
    if c > 0:
        pg_losses3 = -adv_p * c
        clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
        pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3).to(DT) * (adv_p < 0).to(DT), mask)
        pg_losses = torch.where(adv_p < 0, clip_pg_losses2, clip_pg_losses1)
    else:
        pg_clipfrac_lower = torch.zeros((), dtype=DT)
        pg_losses = clip_pg_losses1
    metrics = {}
    rc = dict(cfg.get("rollout_correction", {}))
    tis_cap = cfg.get("tis_cap", 0.0)
    if tis_cap > 0:  # the older spelling of token TIS
        rc.update({"is": "token", "is_threshold": tis_cap})
    rc_mask = rc.get("mask", "none")
    if rc.get("is", "none") != "none" or rc_mask != "none" or rc.get("icepop", False):
        factor, keep, seq_keep, capped = rollout_correction(old_p, b.pad(rollout), mask, rc)
        pg_losses = pg_losses * factor
        metrics["rollout_corr/is_weight_mean"] = float(masked_mean(factor, mask))
        if rc_mask != "none" or rc.get("icepop", False):
            metrics["rollout_corr/masked_frac"] = float(masked_mean(1 - keep, mask))
        if rc_mask in ("sequence", "geometric"):
            valid_seq = mask.sum(dim=-1) > 0
            metrics["rollout_corr/seq_masked_frac"] = float((1 - seq_keep[valid_seq]).mean())
        if tis_cap > 0:
            metrics["tis_ratio"] = metrics["rollout_corr/is_weight_mean"]
        if rc.get("is", "none") != "none" and tis_cap == 0 and not 0 < capped < 1:
            raise SystemExit(f"{name}: share of capped IS weights {capped}; the case does not exercise the cap")
    mode = cfg.get("agg", "token-mean")
    pg_loss = agg_loss(pg_losses, mask, mode)
    total = pg_loss
    if with_entropy:
        entropy_agg = agg_loss(ent_p, mask, mode)
        metrics["entropy"] = float(entropy_agg)
        if cfg.get("entropy_coef", 0.0) > 0:
            total = total - cfg["entropy_coef"] * entropy_agg
    if with_ref:
        kl_loss = agg_loss(kl_penalty(logp_p, b.pad(ref), cfg.get("kl_estimator", "k3")), mask, mode)
        metrics["kl_loss"] = float(kl_loss)
        if cfg.get("kl_coef", 0.0) > 0 and not cfg.get("kl_in_reward", False):
            total = total + cfg["kl_coef"] * kl_loss
    if total.requires_grad:
        total.backward()
    dlogp = b.unpad(logp_p.grad) if logp_p.grad is not None else torch.zeros(T, dtype=DT)
    metrics.update(pg_loss=float(pg_loss), pg_clipfrac=float(pg_clipfrac),
                   pg_clipfrac_lower=float(pg_clipfrac_lower), ppo_kl=float(ppo_kl))
    for key in require_partial:  # the case must exercise both sides of that clip
        if not 0 < metrics[key] < 1:
            raise SystemExit(f"{name}: {key} = {metrics[key]}, the case does not exercise it; change its inputs")
    expected = {"loss": float(total), "dlogp": vec(dlogp), "metrics": metrics}
    if with_entropy and cfg.get("entropy_coef", 0.0) > 0:
        expected["dentropy"] = vec(b.unpad(ent_p.grad))
    inputs = {"cu": b.cu, "logp": vec(logp), "old_logp": vec(old), "advantages": vec(adv), "mask": vec(b.mask_flat)}
    if with_ref:
        inputs["ref_logp"] = vec(ref)
    if with_entropy:
        inputs["entropy"] = vec(entropy)
    if with_rollout:
        inputs["rollout_logp"] = vec(rollout)
    cfg = dict(cfg)
    if mode == "seq-mean-token-sum-norm":
        cfg["token_sum_norm"] = TOKEN_SUM_NORM
    return {"name": name, "kind": "policy", "config": cfg, "inputs": inputs, "expected": expected}


def value_case(name, seed, value_clip, agg, lengths=LENGTHS, tie=False, hole_prob=0.15, at_bound=False):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(lengths, gen, hole_prob=hole_prob)
    T = b.T
    old = rand_normal(gen, T)
    values = old if tie else f32(old + rand_normal(gen, T, 0.3))  # tie: the first update, before any step
    if at_bound:  # values exactly on old +- value_clip (dyadic numbers, exact in float32): torch's tie rules
        old = torch.round(old * 64) / 64
        side = torch.where(torch.rand(T, generator=gen, dtype=DT) < 0.5, -1.0, 1.0).to(DT)
        values = old + side * value_clip
    returns = f32(old + rand_normal(gen, T, 0.5))
    v = b.pad(values).requires_grad_(True)
    old_p, ret_p, mask = b.pad(old), b.pad(returns), b.mask
    vf_losses1 = (v - ret_p) ** 2
    if value_clip > 0:
        vpredclipped = torch.max(torch.min(v, old_p + value_clip), old_p - value_clip)  # verl clip_by_value
        vf_losses2 = (vpredclipped - ret_p) ** 2
        clipped = torch.max(vf_losses1, vf_losses2)
        clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).to(DT), mask)
    else:
        clipped = vf_losses1
        clipfrac = torch.zeros((), dtype=DT)
    vf_loss = 0.5 * agg_loss(clipped, mask, agg)
    if vf_loss.requires_grad:
        vf_loss.backward()
    dvalue = b.unpad(v.grad) if v.grad is not None else torch.zeros(T, dtype=DT)
    cfg = {"value_clip": value_clip, "value_agg": agg}
    return {"name": name, "kind": "value", "config": cfg,
            "inputs": {"cu": b.cu, "values": vec(values), "old_values": vec(old), "returns": vec(returns),
                       "mask": vec(b.mask_flat)},
            "expected": {"loss": float(vf_loss), "dvalue": vec(dvalue),
                         "metrics": {"vf_loss": float(vf_loss), "vf_clipfrac": float(clipfrac),
                                     "vpred_mean": float(masked_mean(v.detach(), mask))}}}


def sft_case(name, seed, agg, lengths=LENGTHS):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(lengths, gen)
    logp = rand_uniform(gen, b.T, -6.0, -0.01)
    lp = b.pad(logp).requires_grad_(True)
    loss = agg_loss(-lp, b.mask, agg)
    if loss.requires_grad:
        loss.backward()
    return {"name": name, "kind": "sft", "config": {"agg": agg, "token_sum_norm": TOKEN_SUM_NORM},
            "inputs": {"cu": b.cu, "logp": vec(logp), "mask": vec(b.mask_flat)},
            "expected": {"loss": float(loss), "dlogp": vec(b.unpad(lp.grad)),
                         "metrics": {"sft_loss": float(loss),
                                     "sft_nll": float(masked_mean(-lp.detach(), b.mask))}}}


def dpo_case(name, seed, beta, pairs, lengths=(6, 4, 1, 8, 3, 5), global_pairs=None, loss_type="sigmoid",
             label_smoothing=0.0, simpo_gamma=0.5):
    """TRL's DPOTrainer.dpo_loss (sigmoid, robust, ipo; IPO on length-averaged log-probs, as TRL averages
    all_logps by the completion size for ipo) and CPOTrainer's simpo (reference-free, averaged, margin gamma)."""
    gen = torch.Generator().manual_seed(seed)
    b = Batch(lengths, gen, hole_prob=0.1)
    logp = rand_uniform(gen, b.T, -4.0, -0.05)
    ref = f32(logp + rand_normal(gen, b.T, 0.4))
    lp = b.pad(logp).requires_grad_(True)
    s = (lp * b.mask).sum(dim=-1)
    r = (b.pad(ref) * b.mask).sum(dim=-1)
    if loss_type in ("ipo", "simpo"):
        size = b.mask.sum(dim=-1).clamp(min=1.0)
        s, r = s / size, r / size
    if loss_type == "simpo":
        r = torch.zeros_like(r)
    n = float(global_pairs if global_pairs is not None else len(pairs))
    chosen = torch.stack([beta * (s[c] - r[c]) for c, _ in pairs])
    rejected = torch.stack([beta * (s[j] - r[j]) for _, j in pairs])
    logits = (chosen - rejected) / beta  # the policy's log-ratio margin minus the reference's
    ls = label_smoothing
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * logits) * (1 - ls) - F.logsigmoid(-beta * logits) * ls
    elif loss_type == "robust":
        losses = (-F.logsigmoid(beta * logits) * (1 - ls) + F.logsigmoid(-beta * logits) * ls) / (1 - 2 * ls)
    elif loss_type == "ipo":
        losses = (logits - 1 / (2 * beta)) ** 2
    else:  # simpo, as TRL's CPOTrainer writes it
        logits = logits - simpo_gamma / beta
        losses = -F.logsigmoid(beta * logits) * (1 - ls) - F.logsigmoid(-beta * logits) * ls
    loss = losses.sum() / n
    loss.backward()
    config = {"beta": beta, "loss_type": loss_type, "label_smoothing": label_smoothing, "simpo_gamma": simpo_gamma}
    return {"name": name, "kind": "dpo", "config": config, "global_num_pairs": n,
            "inputs": {"cu": b.cu, "logp": vec(logp), "ref_logp": vec(ref), "mask": vec(b.mask_flat),
                       "pairs": [list(p) for p in pairs]},
            "expected": {"loss": float(loss), "dlogp": vec(b.unpad(lp.grad)),
                         "metrics": {"dpo_loss": float(loss),
                                     "dpo_reward_chosen": float(chosen.mean()),
                                     "dpo_reward_rejected": float(rejected.mean()),
                                     "dpo_reward_margin": float((chosen - rejected).mean()),
                                     "dpo_accuracy": float((chosen > rejected).to(DT).mean())}}}


def kl_case(name, seed, estimator):
    gen = torch.Generator().manual_seed(seed)
    logp = rand_uniform(gen, 40, -4.0, -0.01)
    ref = f32(logp + rand_normal(gen, 40, 1.0))
    # The clamps: ref - logp beyond +-20, and k3 values above 10 (x = 3 and x = -12).
    logp = torch.cat([logp, f32(torch.tensor([-25.0, -1.0, -1.0, -0.5, -2.0], dtype=DT))])
    ref = torch.cat([ref, f32(torch.tensor([-1.0, -26.0, 2.0, -12.5, -2.0], dtype=DT))])
    lp = logp.clone().requires_grad_(True)
    kl = kl_penalty(lp, ref, estimator)
    kl.sum().backward()
    return {"name": name, "kind": "kl", "config": {"kl_estimator": estimator},
            "inputs": {"logp": vec(logp), "ref_logp": vec(ref)},
            "expected": {"value": vec(kl), "dlogp": vec(lp.grad)}}


def grpo_case(name, seed, cfg):
    gen = torch.Generator().manual_seed(seed)
    # Groups (not contiguous): 0 and 1 random, 2 all equal, 3 a single sample, 4 binary rewards.
    ids = [0, 1, 0, 2, 1, 0, 2, 3, 1, 0, 2, 4, 4, 4, 4]
    scores = rand_normal(gen, len(ids))
    scores[3] = scores[6] = scores[10] = 0.75
    scores[11:15] = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=DT)
    est = cfg["estimator"]
    by_id = {}
    for i, g in enumerate(ids):
        by_id.setdefault(g, []).append(i)
    adv = torch.zeros(len(ids), dtype=DT)
    for g, members in by_id.items():  # verl compute_grpo_outcome_advantage / compute_rloo_outcome_advantage
        x = scores[members]
        n = len(members)
        if n == 1:
            mean, std = torch.tensor(0.0, dtype=DT), torch.tensor(1.0, dtype=DT)
        else:
            mean, std = x.mean(), x.std()
        for i in members:
            if est == "rloo":
                adv[i] = scores[i] * n / (n - 1) - mean * n / (n - 1) if n > 1 else scores[i]
            elif est == "grpo" and cfg.get("norm_by_std", True):
                adv[i] = (scores[i] - mean) / (std + cfg.get("eps", 1e-6))
            else:
                adv[i] = scores[i] - mean
    return {"name": name, "kind": "group_adv", "config": cfg,
            "inputs": {"scores": vec(scores), "group_ids": ids}, "expected": {"advantages": vec(adv)}}


def gae_case(name, seed, gamma, lam, whiten):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(LENGTHS, gen, hole_prob=0.2)
    rewards = rand_normal(gen, b.T, 0.3)
    values = rand_normal(gen, b.T)
    r, v, mask = b.pad(rewards), b.pad(values), b.mask
    nextvalues = torch.zeros(b.B, dtype=DT)
    lastgaelam = torch.zeros(b.B, dtype=DT)
    rev = []
    for t in reversed(range(b.L)):  # verl compute_gae_advantage_return
        delta = r[:, t] + gamma * nextvalues - v[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = v[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        rev.append(lastgaelam)
    adv = torch.stack(rev[::-1], dim=1) if rev else torch.zeros(b.B, 0, dtype=DT)
    returns = adv + v
    if whiten:
        adv = masked_whiten(adv, mask)
    # The C++ leaves 0 where mask = 0 (verl leaves values there that every loss masks out).
    return {"name": name, "kind": "gae", "config": {"gamma": gamma, "lambda": lam, "whiten": whiten},
            "inputs": {"cu": b.cu, "mask": vec(b.mask_flat), "rewards": vec(rewards), "values": vec(values)},
            "expected": {"advantages": vec(b.unpad(adv * mask)), "returns": vec(b.unpad(returns * mask))}}


def token_rewards_case(name, seed, kl_coef, estimator):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(LENGTHS, gen, hole_prob=0.2, masked_seq=4)
    scores = rand_normal(gen, b.B)
    old = rand_uniform(gen, b.T, -3.0, -0.05)
    ref = f32(old + rand_normal(gen, b.T, 0.3))
    mask = b.mask
    kld = kl_penalty(b.pad(old), b.pad(ref), estimator) * mask  # verl apply_kl_penalty
    rewards = -kl_coef * kld
    for i in range(b.B):
        valid = [t for t in range(b.lengths[i]) if mask[i, t] > 0]
        if valid:
            rewards[i, valid[-1]] += scores[i]
    counts = mask.sum(dim=-1)
    has = counts > 0
    per_seq_kl = kld.sum(dim=-1)[has] / counts[has]
    metrics = {"reward_kl_penalty": float(per_seq_kl.mean()), "reward_kl_penalty_coeff": kl_coef}
    return {"name": name, "kind": "token_rewards", "config": {"kl_coef": kl_coef, "kl_estimator": estimator},
            "inputs": {"cu": b.cu, "mask": vec(b.mask_flat), "scores": vec(scores), "old_logp": vec(old),
                       "ref_logp": vec(ref)},
            "expected": {"rewards": vec(b.unpad(rewards)), "seq_rewards": vec(rewards.sum(dim=-1)),
                         "metrics": metrics}}


def reinforce_case(name, seed, gamma):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(LENGTHS, gen, hole_prob=0.2)
    rewards = rand_normal(gen, b.T, 0.3)
    r, mask = b.pad(rewards), b.mask
    returns = torch.zeros_like(r)
    running = torch.zeros(b.B, dtype=DT)
    for t in reversed(range(b.L)):  # verl compute_reinforce_plus_plus_outcome_advantage
        running = r[:, t] + gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    adv = masked_whiten(returns, mask) * mask
    return {"name": name, "kind": "reinforce_adv", "config": {"gamma": gamma},
            "inputs": {"cu": b.cu, "mask": vec(b.mask_flat), "rewards": vec(rewards)},
            "expected": {"advantages": vec(b.unpad(adv)), "returns": vec(b.unpad(returns))}}


def data_metrics_case(name, seed):
    gen = torch.Generator().manual_seed(seed)
    b = Batch(LENGTHS, gen, hole_prob=0.2)
    scores = rand_normal(gen, b.B)
    seq_rewards = f32(scores - rand_uniform(gen, b.B, 0.0, 0.1))
    adv = rand_normal(gen, b.T)
    values = rand_normal(gen, b.T)
    returns = f32(values + rand_normal(gen, b.T, 0.5))
    valid = b.mask_flat > 0
    m = {}
    for key, x in (("score", scores), ("rewards", seq_rewards), ("advantages", adv[valid]),
                   ("returns", returns[valid]), ("values", values[valid])):
        m[key + "/mean"], m[key + "/max"], m[key + "/min"] = float(x.mean()), float(x.max()), float(x.min())
    vr, vv = returns[valid], values[valid]
    m["vf_explained_var"] = float(1.0 - torch.var(vr - vv) / (torch.var(vr) + 1e-5))
    return {"name": name, "kind": "data_metrics", "config": {},
            "inputs": {"cu": b.cu, "mask": vec(b.mask_flat), "scores": vec(scores), "seq_rewards": vec(seq_rewards),
                       "advantages": vec(adv), "returns": vec(returns), "values": vec(values)},
            "expected": {"metrics": m}}


def all_cases():
    cases = []
    base = {"clip_low": 0.2, "clip_high": 0.2, "clip_c": 0.0}
    for i, agg in enumerate(AGGS):
        cases.append(policy_case(f"policy_clip_{agg}", 100 + i, {**base, "agg": agg},
                                 require_partial=("pg_clipfrac",)))
        cases.append(policy_case(f"policy_dapo_dual_kl_entropy_{agg}", 1100 + i,
                                 {"clip_low": 0.2, "clip_high": 0.28, "clip_c": 3.0, "agg": agg, "kl_coef": 0.05,
                                  "kl_estimator": "k3", "entropy_coef": 0.01},
                                 log_ratio_scale=1.5, with_ref=True, with_entropy=True,
                                 require_partial=("pg_clipfrac", "pg_clipfrac_lower")))
        cases.append(value_case(f"value_clip_{agg}", 120 + i, 0.2, agg))
        cases.append(sft_case(f"sft_{agg}", 130 + i, agg))
    for est in ("k1", "k2", "k3"):
        cases.append(policy_case(f"policy_kl_loss_{est}", 140 + len(cases), {**base, "kl_coef": 0.1,
                                 "kl_estimator": est}, with_ref=True, ref_scale=1.5))
    cases.append(policy_case("policy_kl_in_reward_not_in_loss", 150,
                             {**base, "kl_coef": 0.1, "kl_estimator": "k1", "kl_in_reward": True}, with_ref=True))
    cases.append(policy_case("policy_entropy_metric_only", 151, base, with_entropy=True))
    cases.append(policy_case("policy_wide_ratios_dual_clip", 152, {**base, "clip_c": 3.0}, log_ratio_scale=1.5,
                             require_partial=("pg_clipfrac", "pg_clipfrac_lower")))
    cases.append(policy_case("policy_every_token_clipped", 153, {**base, "clip_high": 0.28}, every_clipped="high"))
    cases.append(policy_case("policy_every_token_dual_clipped", 154, {**base, "clip_c": 3.0}, every_clipped="dual"))
    cases.append(policy_case("policy_log_ratio_clamp", 155, {**base, "clip_c": 3.0}, log_ratio_scale=15.0))
    cases.append(policy_case("policy_log_ratio_clamp_no_dual_clip", 165, base, log_ratio_scale=15.0))
    cases.append(policy_case("policy_tis", 156, {**base, "tis_cap": 2.0}, with_rollout=True))
    cases.append(policy_case("policy_masked_sequence_seq_mean", 157, {**base, "agg": "seq-mean-token-mean"},
                             masked_seq=3))
    cases.append(policy_case("policy_one_token_response", 158, {**base, "clip_c": 3.0}, lengths=[1],
                             log_ratio_scale=0.5, hole_prob=0.0))
    cases.append(policy_case("policy_empty_responses", 159, {**base, "agg": "seq-mean-token-mean"}, lengths=[0, 0]))
    cases.append(value_case("value_no_clip", 160, 0.0, "token-mean"))
    cases.append(value_case("value_first_update_tie", 161, 0.2, "token-mean", tie=True))
    cases.append(value_case("value_at_clip_bound", 164, 0.25, "token-mean", at_bound=True))
    cases.append(value_case("value_one_token_response", 162, 0.2, "seq-mean-token-mean", lengths=[1],
                            hole_prob=0.0))
    cases.append(sft_case("sft_empty_responses", 163, "token-mean", lengths=[0, 0, 0]))
    cases.append(dpo_case("dpo_beta_0.1", 170, 0.1, [(0, 1), (3, 2), (5, 4)]))
    cases.append(dpo_case("dpo_beta_0.5_micro_batch_of_global", 171, 0.5, [(1, 3), (4, 0)], global_pairs=6))
    cases.append(dpo_case("dpo_large_margin", 172, 8.0, [(0, 5), (2, 1)]))
    cases.append(dpo_case("dpo_cdpo_label_smoothing", 173, 0.5, [(0, 1), (3, 2), (5, 4)], label_smoothing=0.1))
    cases.append(dpo_case("dpo_robust", 174, 0.5, [(0, 1), (3, 2), (5, 4)], loss_type="robust",
                          label_smoothing=0.2))
    cases.append(dpo_case("dpo_ipo", 175, 0.1, [(0, 1), (3, 2), (5, 4)], loss_type="ipo"))
    cases.append(dpo_case("dpo_ipo_micro_batch_of_global", 176, 0.5, [(1, 3), (4, 0)], loss_type="ipo",
                          global_pairs=6))
    cases.append(dpo_case("dpo_simpo", 177, 2.0, [(0, 1), (3, 2), (5, 4)], loss_type="simpo", simpo_gamma=0.5))
    cases.append(dpo_case("dpo_simpo_label_smoothing", 178, 2.5, [(0, 5), (2, 1)], loss_type="simpo",
                          simpo_gamma=1.0, label_smoothing=0.15))
    for est in ("k1", "k2", "k3"):
        cases.append(kl_case(f"kl_{est}", 180 + len(cases), est))
    cases.append(kl_case("kl_low_var_kl_alias", 185, "low_var_kl"))
    cases.append(grpo_case("adv_grpo", 190, {"estimator": "grpo"}))
    cases.append(grpo_case("adv_grpo_eps", 191, {"estimator": "grpo", "eps": 0.1}))
    cases.append(grpo_case("adv_grpo_no_std", 192, {"estimator": "grpo", "norm_by_std": False}))
    cases.append(grpo_case("adv_drgrpo", 193, {"estimator": "drgrpo"}))
    cases.append(grpo_case("adv_rloo", 194, {"estimator": "rloo"}))
    cases.append(gae_case("gae_gamma1_lambda1_whiten", 200, 1.0, 1.0, True))
    cases.append(gae_case("gae_0.99_0.95_whiten", 201, 0.99, 0.95, True))
    cases.append(gae_case("gae_0.9_0.8_raw", 202, 0.9, 0.8, False))
    cases.append(token_rewards_case("token_rewards_k1", 210, 0.05, "k1"))
    cases.append(token_rewards_case("token_rewards_k3", 211, 0.2, "k3"))
    cases.append(data_metrics_case("data_metrics", 220))
    # Rollout corrections (verl's rollout_is / rollout_rs, IcePop): the engine's logp 0.5 from old on average, so
    # every mask drops some tokens or sequences and keeps others.
    rc_cases = [
        ("policy_rc_is_token", 230, "token-mean", {"is": "token", "is_threshold": 1.5}, ()),
        ("policy_rc_is_sequence", 231, "seq-mean-token-mean", {"is": "sequence", "is_threshold": 2.0}, ()),
        ("policy_rc_mask_token", 232, "token-mean", {"mask": "token", "mask_low": 0.5, "mask_high": 2.0},
         ("rollout_corr/masked_frac",)),
        ("policy_rc_mask_sequence", 233, "seq-mean-token-sum", {"mask": "sequence", "mask_low": 0.4,
                                                                "mask_high": 2.5},
         ("rollout_corr/masked_frac", "rollout_corr/seq_masked_frac")),
        ("policy_rc_mask_geometric", 234, "token-mean", {"mask": "geometric", "mask_low": 0.8, "mask_high": 1.25},
         ("rollout_corr/masked_frac", "rollout_corr/seq_masked_frac")),
        ("policy_rc_icepop", 235, "seq-mean-token-sum-norm", {"icepop": True, "icepop_low": 0.5, "icepop_high": 2.0},
         ("rollout_corr/masked_frac",)),
        ("policy_rc_is_sequence_mask_geometric", 236, "seq-mean-token-mean",
         {"is": "sequence", "is_threshold": 3.0, "mask": "geometric", "mask_low": 0.8, "mask_high": 1.25},
         ("rollout_corr/masked_frac", "rollout_corr/seq_masked_frac")),
        ("policy_rc_icepop_mask_sequence", 237, "token-mean",
         {"icepop": True, "mask": "sequence", "mask_low": 0.4, "mask_high": 2.5},
         ("rollout_corr/masked_frac", "rollout_corr/seq_masked_frac")),
    ]
    for name, seed, agg, rc, partial in rc_cases:
        cases.append(policy_case(name, seed, {**base, "agg": agg, "clip_c": 3.0, "kl_coef": 0.05, "entropy_coef": 0.01,
                                              "rollout_correction": rc},
                                 log_ratio_scale=0.5, with_ref=True, with_entropy=True, with_rollout=True,
                                 rollout_scale=0.5, require_partial=("pg_clipfrac",) + partial))
    # GSPO: the sequence ratio against a clip wide enough that some sequences are clipped and some not; the
    # paper's (3e-4, 4e-4) band with a KL and entropy; sequence log-ratios past the clamp at 10.
    cases.append(policy_case("policy_gspo_token_mean", 240, {**base, "loss_mode": "gspo", "clip_low": 0.02,
                                                             "clip_high": 0.02}, log_ratio_scale=0.3,
                             require_partial=("pg_clipfrac",)))
    cases.append(policy_case("policy_gspo_paper_band_kl_entropy", 241,
                             {**base, "loss_mode": "gspo", "clip_low": 3e-4, "clip_high": 4e-4,
                              "agg": "seq-mean-token-mean", "kl_coef": 0.05, "entropy_coef": 0.01},
                             log_ratio_scale=0.002, with_ref=True, with_entropy=True,
                             require_partial=("pg_clipfrac",)))
    cases.append(policy_case("policy_gspo_seq_log_ratio_clamp", 242, {**base, "loss_mode": "gspo"},
                             log_ratio_scale=15.0, masked_seq=3))
    cases.append(policy_case("policy_gspo_rollout_correction", 243,
                             {**base, "loss_mode": "gspo", "agg": "seq-mean-token-sum",
                              "rollout_correction": {"is": "token", "is_threshold": 1.5}},
                             log_ratio_scale=0.3, with_rollout=True, rollout_scale=0.5))
    # CISPO: no lower bound (clip_low 1) and a cap that binds on some tokens; with a lower bound too.
    cases.append(policy_case("policy_cispo_token_mean", 250, {**base, "loss_mode": "cispo", "clip_low": 1.0,
                                                              "clip_high": 0.28},
                             log_ratio_scale=0.5, require_partial=("pg_clipfrac",)))
    cases.append(policy_case("policy_cispo_both_bounds_kl", 251,
                             {**base, "loss_mode": "cispo", "clip_low": 0.2, "clip_high": 0.2,
                              "agg": "seq-mean-token-mean", "kl_coef": 0.05},
                             log_ratio_scale=0.5, with_ref=True, require_partial=("pg_clipfrac",)))
    cases.append(reinforce_case("adv_reinforce_pp_gamma1", 260, 1.0))
    cases.append(reinforce_case("adv_reinforce_pp_gamma0.9", 261, 0.9))
    return cases


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "losses_golden.json")
    doc = {"generator": "tests/golden/losses_golden.py", "torch": torch.__version__, "cases": all_cases()}
    for case in doc["cases"]:  # a golden value that is not finite would make the test meaningless
        def check(x, where):
            if isinstance(x, float) and not math.isfinite(x):
                raise SystemExit(f"{case['name']}: non-finite golden value at {where}")
            if isinstance(x, dict):
                for k, v in x.items():
                    check(v, f"{where}.{k}")
            if isinstance(x, list):
                for i, v in enumerate(x):
                    check(v, f"{where}[{i}]")
        check(case["expected"], "expected")
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    os.replace(out + ".tmp", out)
    print(f"wrote {len(doc['cases'])} cases to {out}")


if __name__ == "__main__":
    main()
