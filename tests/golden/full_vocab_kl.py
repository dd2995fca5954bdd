"""Full-vocabulary KL(p || q) and total variation per scored position, independently of rlcpp (numpy).

Usage: full_vocab_kl.py IN.json -> prints {"kl_mean", "kl_max", "tv_mean", "tv_max"} as one JSON line.
IN.json: {"temperature": T, "rows": [i, ...], "a": [[logits]], "b": [[logits]]}: rows are the scored positions.
"""
import json
import sys

import numpy as np


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def main():
    d = json.load(open(sys.argv[1]))
    t = float(d["temperature"])
    rows = np.array(d["rows"], dtype=np.int64)
    a = np.array(d["a"], dtype=np.float64)[rows] / t
    b = np.array(d["b"], dtype=np.float64)[rows] / t
    lp, lq = log_softmax(a), log_softmax(b)
    p, q = np.exp(lp), np.exp(lq)
    kl = (p * (lp - lq)).sum(axis=-1)
    tv = 0.5 * np.abs(p - q).sum(axis=-1)
    print(json.dumps({"kl_mean": kl.mean(), "kl_max": kl.max(), "tv_mean": tv.mean(), "tv_max": tv.max()}))


if __name__ == "__main__":
    main()
