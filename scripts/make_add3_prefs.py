#!/usr/bin/env python3
"""Writes the example DPO preference data for add3 (rlcpp dpo configs/dpo_pairs_example.json):

  configs/data/add3_prefs.jsonl       pairs from add3's TRAIN split
  configs/data/add3_prefs_eval.jsonl  pairs from add3's held-out TEST split

One JSON object per line: {"prompt": "123+456=", "chosen": "579", "rejected": "..."}, chosen the correct sum,
rejected a typical wrong one (the sum without carries, or the sum off by 1, 10 or 100). The split is the one
reward/split_hash.h defines: (a, b) is a test problem iff splitmix64(a * 1000 + b) % 10 == 0, so the training
pairs never contain a problem of `rlcpp eval`'s held-out set. Deterministic: the same seed writes the same files.

usage: scripts/make_add3_prefs.py [--train 1024] [--eval 200] [--seed 7] [--out configs/data]
"""

import argparse
import json
import os
import random

MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def is_test(a, b):
    return splitmix64(a * 1000 + b) % 10 == 0


def wrong_sum(a, b, rng):
    right = a + b
    no_carry = int("".join(str((int(x) + int(y)) % 10) for x, y in zip(f"{a:03d}", f"{b:03d}")))
    if no_carry != right and rng.random() < 0.5:
        return no_carry
    while True:
        candidate = right + rng.choice([-100, -10, -1, 1, 10, 100])
        if candidate >= 0:
            return candidate


def pairs(n, test, rng):
    out, seen = [], set()
    while len(out) < n:
        a, b = rng.randrange(1000), rng.randrange(1000)
        if is_test(a, b) != test or (a, b) in seen:
            continue
        seen.add((a, b))
        out.append({"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(wrong_sum(a, b, rng))})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", type=int, default=1024)
    p.add_argument("--eval", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "configs", "data"))
    args = p.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    for name, n, test in (("add3_prefs.jsonl", args.train, False), ("add3_prefs_eval.jsonl", args.eval, True)):
        path = os.path.join(args.out, name)
        with open(path, "w") as f:
            for rec in pairs(n, test, rng):
                f.write(json.dumps(rec) + "\n")
        print(f"wrote {n} pairs to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
