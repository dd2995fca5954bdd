#!/usr/bin/python3
"""The headline table of scripts/headline_curve.sh: held-out accuracy against GRPO training wall seconds, rlcpp
vs the PyTorch peer, from the same warm-start checkpoint.

  headline_table.py --rlcpp-run RUN_DIR --rlcpp-start EVAL.json --peer PEER_CURVE.jsonl --out-dir DIR
                    [--levels 60,70,80,85,90]

Both curves get the same shape (one JSON object per evaluation): step, train_wall_s, accuracy, mean_reward
(the training batch's), eval_mean_reward. train_wall_s is wall time of training only, measured the same way on
both sides: from the start of step 1 to the end of step k, minus every evaluation and checkpoint in between.
rlcpp's comes from RUN_DIR/metrics.jsonl: elapsed_s (the controller's wall clock since the loop began, read
after the step's eval and checkpoint) minus the sum of timing_s/eval and timing_s/checkpoint up to that step.
Step 0 is the checkpoint itself (`rlcpp eval` output for rlcpp, the peer's own evaluation for the peer).

Writes DIR/rlcpp_curve.jsonl, DIR/table.md (also printed) and, when matplotlib is present, DIR/curve.png.
"""

import argparse
import json
import os
import statistics
import sys


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rlcpp_curve(run_dir, start):
    """The curve of an `rlcpp train` run directory; `start` is the checkpoint's `rlcpp eval` JSON."""
    curve = [{"step": 0, "train_wall_s": 0.0, "accuracy": start["accuracy"], "mean_reward": None,
              "eval_mean_reward": start["mean_reward"]}]
    excluded = 0.0
    step_s = []
    for m in read_jsonl(os.path.join(run_dir, "metrics.jsonl")):
        excluded += m.get("timing_s/eval", 0.0) + m.get("timing_s/checkpoint", 0.0)
        step_s.append(m["timing_s/step"] - m.get("timing_s/eval", 0.0) - m.get("timing_s/checkpoint", 0.0))
        if "eval/accuracy" in m:
            curve.append({"step": m["step"], "train_wall_s": m["elapsed_s"] - excluded,
                          "accuracy": m["eval/accuracy"], "mean_reward": m["reward/mean"],
                          "eval_mean_reward": m["eval/mean_reward"], "eval_s": m.get("timing_s/eval", 0.0)})
    return curve, step_s


def first_reaching(curve, level):
    """(train_wall_s, step) of the first evaluation with accuracy >= level, or None."""
    for row in curve:
        if row["accuracy"] >= level - 1e-12:
            return row["train_wall_s"], row["step"]
    return None


def fmt_reached(r):
    return "not reached" if r is None else f"{r[0]:.1f} s (step {r[1]})"


def table(rlcpp, peer, levels, rlcpp_step_s, peer_summary, peer_name="PyTorch peer"):
    lines = [f"| held-out accuracy | rlcpp train wall | {peer_name} train wall | peer / rlcpp |",
             "| --- | --- | --- | --- |"]
    for level in levels:
        a, b = first_reaching(rlcpp, level / 100), first_reaching(peer, level / 100)
        if a is not None and b is not None and a[0] > 0:
            ratio = f"**{b[0] / a[0]:.2f}x**"
        elif a is not None and b is not None:
            ratio = "at the start"
        elif a is not None:
            ratio = "peer did not reach it"
        elif b is not None:
            ratio = "rlcpp did not reach it"
        else:
            ratio = "-"
        lines.append(f"| {level:g} % | {fmt_reached(a)} | {fmt_reached(b)} | {ratio} |")
    lines.append("")
    last_r, last_p = rlcpp[-1], peer[-1]
    lines.append(f"- start (step 0, the warm-start checkpoint): rlcpp {100 * rlcpp[0]['accuracy']:.1f} %, "
                 f"peer {100 * peer[0]['accuracy']:.1f} %")
    lines.append(f"- end: rlcpp step {last_r['step']} at {last_r['train_wall_s']:.1f} s, "
                 f"{100 * last_r['accuracy']:.1f} %; peer step {last_p['step']} at {last_p['train_wall_s']:.1f} s, "
                 f"{100 * last_p['accuracy']:.1f} %")
    if rlcpp_step_s and peer_summary and "step_ms" in peer_summary:
        r_ms = 1e3 * statistics.median(rlcpp_step_s)
        p_ms = peer_summary["step_ms"]
        lines.append(f"- median step (eval and checkpoint excluded): rlcpp {r_ms:.0f} ms, peer {p_ms:.0f} ms "
                     f"({peer_summary.get('threads', '?')} threads) = {p_ms / r_ms:.2f}x")
    return "\n".join(lines) + "\n"


def plot(rlcpp, peer, path, peer_name="PyTorch peer"):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, curve in (("rlcpp", rlcpp), (peer_name, peer)):
        ax.plot([r["train_wall_s"] for r in curve], [100 * r["accuracy"] for r in curve], marker="o", label=name)
    ax.set_xlabel("GRPO training wall time (s, eval excluded)")
    ax.set_ylabel("held-out accuracy (%)")
    ax.set_title("add3 GRPO from the same SFT warm start")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rlcpp-run", required=True)
    p.add_argument("--rlcpp-start", required=True, help="`rlcpp eval` JSON of the warm-start checkpoint")
    p.add_argument("--peer", required=True, help="the peer's grpo-run --out file")
    p.add_argument("--peer-summary", default="", help="the peer's grpo-run JSON object (for its step time)")
    p.add_argument("--peer-name", default="PyTorch peer", help="the peer's name in the table and the plot")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--levels", default="60,70,80,85,90")
    args = p.parse_args(argv)
    levels = [float(x) for x in args.levels.split(",") if x]
    with open(args.rlcpp_start) as f:
        start = json.load(f)
    rlcpp, rlcpp_step_s = rlcpp_curve(args.rlcpp_run, start)
    peer = read_jsonl(args.peer)
    if not peer or len(rlcpp) < 2:
        print(f"headline_table: a curve is empty (rlcpp {len(rlcpp) - 1} evaluations, peer {len(peer)})",
              file=sys.stderr)
        return 1
    peer_summary = None
    if args.peer_summary:
        with open(args.peer_summary) as f:
            peer_summary = json.load(f)
    with open(os.path.join(args.out_dir, "rlcpp_curve.jsonl"), "w") as f:
        for row in rlcpp:
            f.write(json.dumps(row) + "\n")
    text = table(rlcpp, peer, levels, rlcpp_step_s, peer_summary, args.peer_name)
    with open(os.path.join(args.out_dir, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")
    if plot(rlcpp, peer, os.path.join(args.out_dir, "curve.png"), args.peer_name):
        print(f"plot: {os.path.join(args.out_dir, 'curve.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
