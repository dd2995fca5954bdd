#!/usr/bin/python3
"""Golden values for tests/trainer_rollout_corr_test.cpp: the rollout_corr/* mismatch metrics in numpy.

An independent implementation of trainer/rollout_corr_metrics.h: it works on whole concatenated arrays with
numpy's reductions (np.mean, np.std, np.corrcoef; the C++ loops over samples and tokens), in float64, from
float32 inputs (what the C++ reads). Definitions are verl's compute_offpolicy_metrics and
calculate_debug_metrics where verl has the figure; see the C++ header for the list.

    /usr/bin/python3 tests/golden/rollout_corr_golden.py [OUT.json] [--seed N]    (default: next to this script)

Deterministic for a seed (numpy's PCG64). Regenerate and commit the JSON when a definition changes; the C++
test also reruns this script when numpy is importable and checks against the fresh file.
"""

import json
import math
import os
import sys

import numpy as np

DEFAULT_SEED = 20250
SAFETY_BOUND = 20.0
RATIO_BOUND = 2.0
BUCKETS = [("p0.0-0.1", 0.0, 0.1), ("p0.1-0.5", 0.1, 0.5), ("p0.5-0.9", 0.5, 0.9), ("p0.9-1.0", 0.9, math.inf)]
PREFIX = "rollout_corr/"


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def token_figures(p, q, bound):
    r = p - q
    rho = np.exp(np.clip(r, -SAFETY_BOUND, SAFETY_BOUND))
    return {
        "kl": np.mean(q - p),
        "k3_kl": np.mean(np.expm1(r) - r),
        "probs_diff_mean": np.mean(np.abs(np.exp(p) - np.exp(q))),
        "is_weight_mean": np.mean(rho),
        "ratio_outside_frac": np.mean(~((rho >= 1.0 / bound) & (rho <= bound))),
    }


def pearson(x, y):
    if np.var(x) > 0 and np.var(y) > 0:
        return float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))
    return 1.0 if np.array_equal(x, y) else 0.0


def expected_metrics(rollout, trainer, bound):
    """rollout, trainer: lists of float32 arrays (one per sample)."""
    out = {}
    seqs = [(np.asarray(p, np.float64), np.asarray(q, np.float64)) for q, p in zip(rollout, trainer) if len(q) > 0]
    p = np.concatenate([s[0] for s in seqs]) if seqs else np.zeros(0)
    q = np.concatenate([s[1] for s in seqs]) if seqs else np.zeros(0)
    out[PREFIX + "tokens"] = float(len(p))
    prob_q = np.exp(q)
    for label, lo, hi in BUCKETS:
        sel = (prob_q >= lo) & (prob_q < hi)
        key = f"{PREFIX}bucket/{label}/"
        out[key + "tokens"] = float(sel.sum())
        if sel.any():
            for name, value in token_figures(p[sel], q[sel], bound).items():
                out[key + name] = float(value)
    if len(p) == 0:
        return out
    for name, value in token_figures(p, q, bound).items():
        out[PREFIX + name] = float(value)
    mean_p = np.array([s[0].mean() for s in seqs])
    mean_q = np.array([s[1].mean() for s in seqs])
    seq_log_ratio = np.array([(s[0] - s[1]).sum() for s in seqs])
    rho = np.exp(np.clip(p - q, -SAFETY_BOUND, SAFETY_BOUND))
    dp = np.abs(np.exp(p) - np.exp(q))
    out[PREFIX + "training_ppl"] = float(np.mean(np.exp(-mean_p)))
    out[PREFIX + "rollout_ppl"] = float(np.mean(np.exp(-mean_q)))
    out[PREFIX + "log_ppl_diff"] = float(np.mean(mean_q - mean_p))
    out[PREFIX + "chi2_token"] = float(np.mean(rho ** 2) - 1.0)
    out[PREFIX + "chi2_seq"] = float(np.mean(np.exp(2.0 * np.clip(seq_log_ratio, -SAFETY_BOUND, SAFETY_BOUND))) - 1.0)
    out[PREFIX + "probs_diff_max"] = float(dp.max())
    out[PREFIX + "probs_diff_std"] = float(np.std(dp, ddof=1)) if len(dp) > 1 else 0.0
    out[PREFIX + "probs_pearson_corr"] = pearson(np.exp(p), np.exp(q))
    out[PREFIX + "is_weight_std"] = float(np.std(rho))
    out[PREFIX + "is_weight_min"] = float(rho.min())
    out[PREFIX + "is_weight_max"] = float(rho.max())
    out[PREFIX + "is_ess"] = float(rho.sum() ** 2 / (len(rho) * np.sum(rho ** 2)))
    return out


# ---------------------------------------------------------------- inputs
def rollout_logprobs(rng, n):
    """Rollout log-probs whose probabilities land in every bucket: a bucket at random, then uniform in it."""
    edges = [(1e-4, 0.1), (0.1, 0.5), (0.5, 0.9), (0.9, 0.999)]
    picks = rng.integers(0, len(edges), size=n)
    probs = np.array([rng.uniform(*edges[k]) for k in picks])
    return f32(np.log(probs))


def mixed_case(rng, lengths, large_frac, large_scale):
    """Small engine/trainer noise on most tokens, a share of tokens with a large |p - q|."""
    rollout, trainer = [], []
    for n in lengths:
        q = rollout_logprobs(rng, n)
        noise = rng.normal(0.0, 0.05, size=n)
        large = rng.uniform(size=n) < large_frac
        noise[large] = rng.normal(0.0, large_scale, size=int(large.sum()))
        p = f32(np.minimum(q.astype(np.float64) + noise, 0.0))
        rollout.append(q)
        trainer.append(p)
    return rollout, trainer


def beyond_safety_bound_case(rng):
    """Log-ratios past +-20: rho and the sequence ratio hit verl's bound, k3_kl does not."""
    q = f32([-30.0, -0.2, -1.5, -0.01, -25.0])
    p = f32([-5.0, -24.0, -1.4, -0.02, -2.0])
    q2 = rollout_logprobs(rng, 6)
    p2 = f32(q2.astype(np.float64) + rng.normal(0.0, 0.1, size=6))
    return [q, q2], [p, p2]


def case(name, rollout, trainer, bound=RATIO_BOUND):
    return {"name": name, "ratio_bound": bound,
            "inputs": {"rollout_logp": [[float(x) for x in s] for s in rollout],
                       "trainer_logp": [[float(x) for x in s] for s in trainer]},
            "expected": expected_metrics(rollout, trainer, bound)}


def all_cases(seed):
    rng = np.random.default_rng(seed)
    cases = []
    # Varied lengths: an empty and a one-token sample among them.
    rollout, trainer = mixed_case(rng, [7, 1, 0, 23, 12, 40, 5, 16, 31], large_frac=0.12, large_scale=1.5)
    cases.append(case("mixed", rollout, trainer))
    mixed = cases[-1]["expected"]
    for label, _, _ in BUCKETS:  # the main case must exercise every bucket and both sides of the band
        if mixed[f"{PREFIX}bucket/{label}/tokens"] < 5:
            raise SystemExit(f"mixed: bucket {label} has too few tokens; change the inputs")
    if not 0 < mixed[PREFIX + "ratio_outside_frac"] < 1:
        raise SystemExit("mixed: ratio_outside_frac does not exercise the band; change the inputs")
    rollout, trainer = mixed_case(rng, [9, 14, 3], large_frac=0.3, large_scale=0.8)
    cases.append(case("mixed_ratio_bound_1.5", rollout, trainer, bound=1.5))
    rollout, trainer = beyond_safety_bound_case(rng)
    cases.append(case("beyond_safety_bound", rollout, trainer))
    cases.append(case("one_token", [f32([-0.7])], [f32([-0.9])]))
    cases.append(case("empty", [f32([]), f32([])], [f32([]), f32([])]))
    return cases


def main():
    args = [a for a in sys.argv[1:]]
    seed = DEFAULT_SEED
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    out = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "rollout_corr_golden.json")
    doc = {"generator": "tests/golden/rollout_corr_golden.py", "numpy": np.__version__, "seed": seed,
           "cases": all_cases(seed)}
    for c in doc["cases"]:  # a golden value that is not finite would make the comparison meaningless
        for key, value in c["expected"].items():
            if not math.isfinite(value):
                raise SystemExit(f"{c['name']}: non-finite golden value {key} = {value}")
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    os.replace(out + ".tmp", out)
    print(f"wrote {len(doc['cases'])} cases to {out}")


if __name__ == "__main__":
    main()
