#!/usr/bin/env python3
"""Writes GSM8K-style word problems as dataset JSONL (task.name "dataset", task.scorer "math").

The problems are exactly those of the `words` task (reward/word_problems.cpp): this script reimplements its
Philox stream and templates draw for draw, and tests/reward_word_problems_test.cpp checks the shipped files
against the C++ generator, so change the two together.

  train: the first --train distinct training problems (split keys not held out, repeats of a key skipped) of
         the training stream of --seed (the stream `make_train_stream` gives for task.seed);
  test:  the `words` task's eval_set(--test) for --eval-seed (distinct held-out problems).

One line: {"prompt": ..., "answer": "<worked solution>\\n#### N", "meta": {"template", "numbers", "steps"}}.

    python3 scripts/make_word_problems.py            # configs/data/words_train.jsonl, words_test.jsonl
"""

import argparse
import json
import os

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF
TRAIN_STREAM = 0x74726169  # "trai", reward/task_registry.cpp
EVAL_STREAM = 0x6576616C  # "eval"
INSTRUCTION = 'Show your work, then write the final answer on its own line as "#### N".'


def philox4x32_10(ctr, key):
    """Random123 Philox-4x32 with 10 rounds."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r > 0:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
    return [c0, c1, c2, c3]


class PhiloxStream:
    """core/philox.h's PhiloxStream: counter (stream, index), key = seed."""

    def __init__(self, seed, stream):
        self.key = (seed & MASK32, (seed >> 32) & MASK32)
        self.stream = stream
        self.index = 0
        self.buf = []

    def next_u32(self):
        if not self.buf:
            ctr = (self.stream & MASK32, (self.stream >> 32) & MASK32, self.index & MASK32, (self.index >> 32) & MASK32)
            self.buf = philox4x32_10(ctr, self.key)
            self.index += 1
        return self.buf.pop(0)

    def next_u64(self):
        hi = self.next_u32()
        return (hi << 32) | self.next_u32()

    def below(self, n):
        limit = MASK64 - MASK64 % n
        while True:
            x = self.next_u64()
            if x < limit:
                return x % n


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for byte in s.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def is_test_key(key):
    return splitmix64(key) % 10 == 0


def word_problem_key(template, numbers):
    return fnv1a64(template + ":" + ",".join(str(x) for x in numbers))


# ---- the templates of reward/word_problems.cpp, in the same order and with the same draws ----

PEOPLE = [
    ("Ava", "she"), ("Ben", "he"), ("Chloe", "she"), ("Daniel", "he"), ("Emma", "she"), ("Farid", "he"),
    ("Grace", "she"), ("Hiro", "he"), ("Isla", "she"), ("Jamal", "he"), ("Keiko", "she"), ("Liam", "he"),
    ("Maya", "she"), ("Noah", "he"), ("Olivia", "she"), ("Pedro", "he"), ("Quinn", "she"), ("Ravi", "he"),
    ("Sofia", "she"), ("Tom", "he"), ("Uma", "she"), ("Victor", "he"), ("Wen", "she"), ("Yusuf", "he"),
]
SHOP_ITEMS = ["pens", "notebooks", "apples", "candles", "stickers", "mugs", "batteries", "postcards", "tennis balls",
              "cookies"]
SHARE_OBJECTS = ["marbles", "stickers", "cards", "beads", "stamps", "shells", "crayons", "buttons"]
MACHINES = [("printer", "prints", "print", "pages"), ("machine", "makes", "make", "toys"),
            ("bakery oven", "bakes", "bake", "loaves"), ("factory line", "fills", "fill", "bottles"),
            ("robot", "packs", "pack", "boxes"), ("juicer", "squeezes", "squeeze", "oranges")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
FRACTIONS = [(2, "half", "Half"), (3, "a third", "A third"), (4, "a quarter", "A quarter"), (5, "a fifth", "A fifth")]
BIG_BUYS = ["a jacket", "books", "groceries", "a concert ticket", "shoes", "a gift"]
SMALL_BUYS = ["lunch", "a taxi", "snacks", "a movie", "a magazine", "bus fare"]
SAVINGS_ITEMS = ["bike", "guitar", "video game", "skateboard", "telescope", "backpack"]
BAKED_GOODS = ["cookies", "muffins", "cupcakes", "bagels", "rolls", "brownies"]
BILLS = [20, 50, 100, 200, 500]


def uniform(rng, lo, hi):
    assert lo <= hi, (lo, hi)
    return lo + rng.below(hi - lo + 1)


def pick(rng, items):
    return items[rng.below(len(items))]


def pick_distinct(rng, size, count):
    left = list(range(size))
    return [left.pop(rng.below(len(left))) for _ in range(count)]


def person(rng):
    name, she = pick(rng, PEOPLE)
    return name, she, she.capitalize()


def make(template, numbers, question, steps, answer, n_steps):
    return {"template": template, "numbers": numbers, "question": question,
            "solution": steps + "\n#### " + str(answer), "answer": answer, "steps": n_steps}


def shopping(rng):
    name, she, She = person(rng)
    i, j = pick_distinct(rng, len(SHOP_ITEMS), 2)
    first, second = SHOP_ITEMS[i], SHOP_ITEMS[j]
    a = uniform(rng, 2, 9)
    p = uniform(rng, 2, 15)
    b = uniform(rng, 2, 9)
    q = uniform(rng, 2, 15)
    ap, bq = a * p, b * q
    total = ap + bq
    bill = next(x for x in BILLS if x > total)
    change = bill - total
    question = (f"{name} buys {a} {first} for ${p} each and {b} {second} for ${q} each. {She} pays with a ${bill} "
                f"bill. How much change does {she} get, in dollars?")
    steps = (f"The {first} cost {a} * {p} = {ap} dollars. The {second} cost {b} * {q} = {bq} dollars. Together "
             f"they cost {ap} + {bq} = {total} dollars. The change is {bill} - {total} = {change} dollars.")
    return make("shopping", [a, p, b, q], question, steps, change, 4)


def sharing(rng):
    name, she, She = person(rng)
    objects = pick(rng, SHARE_OBJECTS)
    k = uniform(rng, 2, 8)
    b = uniform(rng, 2, 9)
    c = uniform(rng, 2, 12)
    a0 = uniform(rng, 1, 30)
    a = a0 + (k - (a0 + b * c) % k) % k
    bc = b * c
    total = a + bc
    each = total // k
    question = (f"{name} has {a} {objects}. {She} buys {b} packs with {c} {objects} in each. Then {she} shares all "
                f"of the {objects} equally among {k} friends. How many {objects} does each friend get?")
    steps = (f"The packs hold {b} * {c} = {bc} {objects}. Then {name} has {a} + {bc} = {total} {objects}. Each "
             f"friend gets {total} / {k} = {each} {objects}.")
    return make("sharing", [a, b, c, k], question, steps, each, 3)


def rate(rng):
    machine, verbs, verb, things = pick(rng, MACHINES)
    day = uniform(rng, 0, 5)
    r = uniform(rng, 5, 60)
    h1 = uniform(rng, 2, 10)
    h2 = uniform(rng, 2, 10)
    d1, d2 = DAYS[day], DAYS[day + 1]
    x, y = r * h1, r * h2
    z = x + y
    question = (f"A {machine} {verbs} {r} {things} per hour. It runs for {h1} hours on {d1} and {h2} hours on {d2}. "
                f"How many {things} does it {verb} on the two days together?")
    steps = (f"On {d1} it {verbs} {r} * {h1} = {x} {things}. On {d2} it {verbs} {r} * {h2} = {y} {things}. "
             f"Together that is {x} + {y} = {z} {things}.")
    return make("rate", [r, h1, h2], question, steps, z, 3)


def ages(rng):
    i, j, k = pick_distinct(rng, len(PEOPLE), 3)
    A, B, C = PEOPLE[i][0], PEOPLE[j][0], PEOPLE[k][0]
    a = uniform(rng, 3, 15)
    m = uniform(rng, 2, 4)
    d = uniform(rng, 1, min(20, a * m - 1))
    y = uniform(rng, 2, 15)
    b = a * m
    c = b - d
    r = c + y
    question = (f"{A} is {a} years old. {B} is {m} times as old as {A}. {C} is {d} years younger than {B}. "
                f"How old will {C} be in {y} years?")
    steps = (f"{B} is {a} * {m} = {b} years old. {C} is {b} - {d} = {c} years old. In {y} years {C} will be "
             f"{c} + {y} = {r} years old.")
    return make("ages", [a, m, d, y], question, steps, r, 3)


def remaining(rng):
    name, she, She = person(rng)
    den, lower, upper = pick(rng, FRACTIONS)
    big = pick(rng, BIG_BUYS)
    small = pick(rng, SMALL_BUYS)
    f = uniform(rng, 4, 40)
    m = den * f
    r1 = m - f
    s = uniform(rng, 1, min(60, r1 - 1))
    r2 = r1 - s
    question = (f"{name} has ${m}. {She} spends {lower} of it on {big} and then ${s} on {small}. How many dollars "
                f"does {she} have left?")
    steps = (f"{upper} of {m} dollars is {m} / {den} = {f} dollars, so {she} has {m} - {f} = {r1} dollars left. "
             f"After spending {s} dollars more, {she} has {r1} - {s} = {r2} dollars.")
    return make("remaining", [den, m, s], question, steps, r2, 3)


def savings(rng):
    name, she, She = person(rng)
    item = pick(rng, SAVINGS_ITEMS)
    a = uniform(rng, 3, 25)
    w = uniform(rng, 3, 20)
    c = uniform(rng, 5, a * w - 1)
    t = a * w
    r = t - c
    question = (f"{name} saves ${a} every week. After {w} weeks, {she} buys a {item} that costs ${c}. How many "
                f"dollars does {she} have left?")
    steps = (f"In {w} weeks {she} saves {a} * {w} = {t} dollars. After buying the {item}, {she} has {t} - {c} = {r} "
             f"dollars left.")
    return make("savings", [a, w, c], question, steps, r, 2)


def boxes(rng):
    goods = pick(rng, BAKED_GOODS)
    t = uniform(rng, 2, 9)
    n = uniform(rng, 6, 24)
    b = uniform(rng, 2, 10)
    total = t * n
    s0 = uniform(rng, 1, total - b)
    s = s0 + (total - s0) % b
    rest = total - s
    filled = rest // b
    question = (f"A bakery bakes {t} trays of {goods} with {n} {goods} on each tray. It sells {s} {goods} and packs "
                f"the rest into boxes of {b}. How many boxes does it fill?")
    steps = (f"The bakery bakes {t} * {n} = {total} {goods}. After selling {s}, {total} - {s} = {rest} {goods} are "
             f"left. They fill {rest} / {b} = {filled} boxes.")
    return make("boxes", [t, n, s, b], question, steps, filled, 3)


def reading(rng):
    name, she, She = person(rng)
    p1 = uniform(rng, 5, 30)
    d1 = uniform(rng, 2, 7)
    p2 = uniform(rng, 5, 30)
    d2 = uniform(rng, 2, 7)
    extra = uniform(rng, 10, 200)
    x, y = p1 * d1, p2 * d2
    z = x + y
    pages = z + extra
    question = (f"{name}'s book has {pages} pages. {She} reads {p1} pages a day for {d1} days, then {p2} pages a day "
                f"for {d2} days. How many pages are left to read?")
    steps = (f"First {she} reads {p1} * {d1} = {x} pages. Then {she} reads {p2} * {d2} = {y} pages. That is "
             f"{x} + {y} = {z} pages in all, so {pages} - {z} = {extra} pages are left.")
    return make("reading", [p1, d1, p2, d2, pages], question, steps, extra, 4)


TEMPLATES = [shopping, sharing, rate, ages, remaining, savings, boxes, reading]


def draw(rng):
    w = TEMPLATES[rng.below(len(TEMPLATES))](rng)
    return {
        "prompt": w["question"] + "\n" + INSTRUCTION + "\n",
        "answer": w["solution"],
        "meta": {"template": w["template"], "numbers": w["numbers"], "steps": w["steps"]},
    }


def key_of(problem):
    return word_problem_key(problem["meta"]["template"], problem["meta"]["numbers"])


def distinct_problems(rng, count, want_test):
    seen, out = set(), []
    while len(out) < count:
        p = draw(rng)
        key = key_of(p)
        if is_test_key(key) == want_test and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def write_jsonl(path, problems):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for p in problems:
            f.write(json.dumps(p, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="task.seed: the training stream (default 1)")
    ap.add_argument("--eval-seed", type=int, default=20240917, help="task.eval_seed: the test set (default 20240917)")
    ap.add_argument("--train", type=int, default=2000, help="training problems (default 2000)")
    ap.add_argument("--test", type=int, default=200, help="test problems (default 200)")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "data"))
    args = ap.parse_args()
    train = distinct_problems(PhiloxStream(args.seed, TRAIN_STREAM), args.train, want_test=False)
    test = distinct_problems(PhiloxStream(args.eval_seed, EVAL_STREAM), args.test, want_test=True)
    for name, problems in (("words_train.jsonl", train), ("words_test.jsonl", test)):
        path = os.path.normpath(os.path.join(args.out_dir, name))
        write_jsonl(path, problems)
        print(f"{path}: {len(problems)} problems, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
