#!/usr/bin/python3
"""rlcpp's add3 task in plain Python, drawn exactly as rlcpp draws it, for the PyTorch peer's `grpo-run`:
the character tokenizer, the train/test split, the held-out set, the training stream and the format scorer
(../../reward/arithmetic_task.cpp, scorers.cpp, split_hash.h; ../../core/philox.h; docs/benchmarks.md "Task add3").
No torch needed. tests/reward_peer_task_test.cpp checks it against rlcpp problem by problem.

  add3_task.py eval-set [--n 1000] [--eval-seed 20240917]   one {"a", "b", "prompt", "answer"} per line
  add3_task.py train    [--n 100] [--seed 1]                the first N training problems of a run's stream
  add3_task.py score                                        stdin {"answer", "response", "terminated"} lines
                                                            -> {"total", "correct", "well_formed"} lines
"""

import argparse
import json
import sys

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

# Character tokenizer (tokenizer/tokenizer.h): PAD, BOS, EOS, then this charset as ids 3.. ; vocab 32.
PAD, BOS, EOS = 0, 1, 2
CHARSET = "0123456789+-*= ()/"
DIGITS = 3            # add3: operands in [0, 999]
BASE = 10 ** DIGITS
MAX_NEW_TOKENS = 6    # the longest answer (4 digits) + EOS + one spare, as rlcpp's add3
EVAL_SEED = 20240917  # task.eval_seed default
EVAL_STREAM = 0x6576616C  # "eval": the Philox stream of the held-out set
DATA_STREAM = 1           # the controller's training-problem stream (run seed, stream 1)
FORMAT_SCORE = 0.1


def encode(text):
    return [3 + CHARSET.index(c) for c in text]


def decode(ids):
    """Ids outside the charset decode as '?', as rlcpp's CharTokenizer::decode."""
    return "".join(CHARSET[i - 3] if 3 <= i < 3 + len(CHARSET) else "?" for i in ids)


def encode_prompt(prompt):
    return [BOS] + encode(prompt)


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def is_test_key(key):
    return splitmix64(key) % 10 == 0


def philox4x32_10(counter, key):
    """Random123's Philox4x32-10: four 32-bit counter words, two 32-bit key words -> four 32-bit words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(10):
        if r > 0:
            k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0), p1 & MASK32, ((p0 >> 32) ^ c3 ^ k1), p0 & MASK32
    return c0, c1, c2, c3


class PhiloxStream:
    """core/philox.h's PhiloxStream: block `index` of stream `stream` under `seed` is
    philox(counter (stream lo, stream hi, index lo, index hi), key (seed lo, seed hi)), words used in order."""

    def __init__(self, seed, stream):
        self.key = (seed & MASK32, (seed >> 32) & MASK32)
        self.stream = stream
        self.index = 0
        self.words = []

    def next_u32(self):
        if not self.words:
            ctr = (self.stream & MASK32, (self.stream >> 32) & MASK32, self.index & MASK32, (self.index >> 32) & MASK32)
            self.words = list(philox4x32_10(ctr, self.key))[::-1]
            self.index += 1
        return self.words.pop()

    def next_u64(self):
        hi = self.next_u32()
        return (hi << 32) | self.next_u32()

    def below(self, n):
        """Uniform in [0, n) without modulo bias (rejection above the largest multiple of n)."""
        limit = MASK64 - MASK64 % n
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def make_problem(a, b):
    return {"a": a, "b": b, "prompt": f"{a}+{b}=", "answer": str(a + b)}


def count_test_pairs():
    return sum(1 for key in range(BASE * BASE) if is_test_key(key))


def eval_set(n, eval_seed=EVAL_SEED):
    """The first min(n, test split size) distinct test pairs in the order of the eval seed's stream."""
    if n > BASE * BASE // 20:  # only then can n exceed the ~100k test pairs; counting them takes seconds
        n = min(n, count_test_pairs())
    rng = PhiloxStream(eval_seed, EVAL_STREAM)
    seen, out = set(), []
    while len(out) < n:
        a, b = rng.below(BASE), rng.below(BASE)
        key = a * BASE + b
        if is_test_key(key) and key not in seen:
            seen.add(key)
            out.append(make_problem(a, b))
    return out


def sample_train(rng):
    """A training problem (never a test one): rejection keeps the pairs uniform over the train split."""
    while True:
        a, b = rng.below(BASE), rng.below(BASE)
        if not is_test_key(a * BASE + b):
            return make_problem(a, b)


def is_canonical_integer(s):
    return s.isascii() and s.isdigit() and (len(s) == 1 or s[0] != "0")


def score(answer, response, terminated):
    """The format scorer: 1.0 exact answer then EOS; 0.1 a well-formed non-negative integer then EOS but
    wrong; 0 otherwise. `response` is the decoded text before EOS. Returns (total, correct, well_formed)."""
    well_formed = is_canonical_integer(response)
    correct = terminated and response == answer
    total = 1.0 if correct else (FORMAT_SCORE if terminated and well_formed else 0.0)
    return total, correct, well_formed


def score_tokens(answer, tokens):
    """Scores a generated response (token ids, up to and including its EOS when it has one)."""
    terminated = EOS in tokens
    body = tokens[:tokens.index(EOS)] if terminated else tokens
    return score(answer, decode(body), terminated)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval-set")
    e.add_argument("--n", type=int, default=1000)
    e.add_argument("--eval-seed", type=int, default=EVAL_SEED)
    t = sub.add_parser("train")
    t.add_argument("--n", type=int, default=100)
    t.add_argument("--seed", type=int, default=1)
    sub.add_parser("score")
    args = p.parse_args(argv)
    if args.command == "eval-set":
        problems = eval_set(args.n, args.eval_seed)
    elif args.command == "train":
        rng = PhiloxStream(args.seed, DATA_STREAM)
        problems = [sample_train(rng) for _ in range(args.n)]
    else:
        for line in sys.stdin:
            q = json.loads(line)
            total, correct, well_formed = score(q["answer"], q["response"], q["terminated"])
            print(json.dumps({"total": total, "correct": correct, "well_formed": well_formed}))
        return 0
    for problem in problems:
        print(json.dumps(problem))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
