#!/usr/bin/env python3
"""Draws the plots of `rlcpp mismatch`: plot_mismatch.py PLOT_DATA_JSON OUT_DIR.

PLOT_DATA_JSON is written by rlcpp (mismatch/mismatch_report.cpp): {"buckets": [labels], "points": [point, ...]}, every
number computed there (means over a point's steps, per-step series), null where a point lacks a figure. This
script only draws, and prints the files it wrote:
  bucket_mismatch.png  per rollout-probability bucket, one bar per point: kl, k3_kl, probs_diff_mean
  k3_kl.png            each point's rollout_corr/k3_kl over the steps
  mismatch_steps.png   k3 KL and full-vocabulary TV over the steps (plot_report.py's, as `rlcpp report` draws them)
  mismatch_stages.png  where the mismatch enters: max |Δ| after each stage of the forward, per point (likewise)
  accuracy.png         held-out accuracy of every point on one axes
Needs matplotlib (Debian's python3-matplotlib, installed by scripts/ensure_deps.sh); runs headless.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_report  # noqa: E402  the report's mismatch plots, drawn alike for the sweep's points

DPI = 100
LINE_STYLES = ["-", "--", "-.", ":"]


def value(v):
    return math.nan if v is None else float(v)


def values(xs):
    """JSON nulls as NaN, so matplotlib leaves gaps."""
    return [value(v) for v in xs]


def finite(xs):
    return [v for v in values(xs) if math.isfinite(v)]


def point_colors(n):
    cmap = plt.get_cmap("tab20" if n > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(n)]


def save(fig, out_dir, name, written):
    path = os.path.join(out_dir, name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    written.append(path)


def log_limits(ax, positive):
    """A log axis spanning whole decades around the positive values (at least one decade)."""
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ax.set_ylim(10.0 ** low, 10.0 ** max(high, low + 1))


def plot_buckets(data, out_dir, written):
    """Grouped bars: x the rollout-probability buckets, one bar per point, a panel per figure."""
    points, buckets = data["points"], data["buckets"]
    colors = point_colors(len(points))
    panels = [("kl", "kl = mean(logp_rollout − logp_trainer)", "symlog"),
              ("k3_kl", "k3_kl", "log"),
              ("probs_diff_mean", "probs_diff_mean = mean |p_trainer − p_rollout|", "log")]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.2))
    width = 0.8 / max(1, len(points))
    for ax, (key, title, scale) in zip(axes, panels):
        heights = {}
        for i, point in enumerate(points):
            heights[i] = values(point["bucket"][key])
        nonzero = [abs(v) for hs in heights.values() for v in hs if math.isfinite(v) and v != 0]
        for i, point in enumerate(points):
            xs = [b + (i - (len(points) - 1) / 2) * width for b in range(len(buckets))]
            hs = heights[i]
            drawn = [v if math.isfinite(v) and (scale == "symlog" or v > 0) else math.nan for v in hs]
            recorded = any(math.isfinite(v) for f in ("kl", "k3_kl", "probs_diff_mean")
                           for v in values(point["bucket"][f]))
            ax.bar(xs, [0 if math.isnan(v) else v for v in drawn], width=width, color=colors[i],
                   label=point["name"] + ("" if recorded else " (not recorded)"))
            for x, v in zip(xs, hs):
                if v == 0:  # exactly 0: no bar on a log axis; say so at the foot of the slot
                    ax.annotate("0", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                                textcoords="offset points", ha="center", va="bottom", fontsize=6,
                                color=colors[i])
        if nonzero and scale == "log":
            ax.set_yscale("log")
            log_limits(ax, nonzero)
        elif nonzero:
            ax.set_yscale("symlog", linthresh=10.0 ** math.floor(math.log10(min(nonzero))))
            ax.axhline(0, color="#444444", linewidth=0.8)
        else:
            ax.text(0.5, 0.5, "0 or not recorded in every bucket", ha="center", va="center", transform=ax.transAxes,
                    color="#555555")
        ax.set_xticks(range(len(buckets)))
        ax.set_xticklabels(buckets)
        ax.set_xlabel("rollout probability of the sampled token")
        ax.set_title(title, fontsize="medium")
        ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(points)), fontsize="small")
    fig.suptitle("rollout vs trainer log-probs by rollout-probability bucket (mean over each point's steps)")
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(points) - 1) // 6), 1, 1))
    path = os.path.join(out_dir, "bucket_mismatch.png")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    written.append(path)


def plot_k3_over_steps(data, out_dir, written):
    points = data["points"]
    colors = point_colors(len(points))
    fig, ax = plt.subplots(figsize=(11, 5))
    positive, zero_points, absent_points = [], [], []
    for i, point in enumerate(points):
        ys = values(point["k3_kl"])
        recorded = finite(ys)
        if not recorded:
            absent_points.append(point["name"])
            continue
        if all(v == 0 for v in recorded):
            zero_points.append(point["name"])
            continue
        ys = [v if v > 0 else math.nan for v in ys]
        positive += finite(ys)
        ax.plot(values(point["step"]), ys, LINE_STYLES[(i // 10) % len(LINE_STYLES)], color=colors[i],
                marker="o" if len(ys) <= 30 else None, markersize=3, label=point["name"])
    if positive:
        ax.set_yscale("log")
        log_limits(ax, positive)
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    else:
        ax.text(0.5, 0.5, "no positive k3_kl in any point", ha="center", va="center", transform=ax.transAxes,
                color="#555555")
    notes = []
    if zero_points:
        notes.append("0 at every step: " + ", ".join(zero_points))
    if absent_points:
        notes.append("not recorded (no old_logprob pass, e.g. bypass): " + ", ".join(absent_points))
    if notes:
        ax.text(0.0, -0.16, "\n".join(notes), transform=ax.transAxes, fontsize="small", va="top")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("rollout_corr/k3_kl")
    ax.grid(alpha=0.3)
    ax.set_title("k3 KL(rollout ‖ trainer) of each step's batch")
    save(fig, out_dir, "k3_kl", written)


def plot_accuracy(data, out_dir, written):
    points = data["points"]
    colors = point_colors(len(points))
    fig, ax = plt.subplots(figsize=(11, 5))
    start = data.get("start_accuracy")
    drawn = [] if start is None else [100.0 * start]
    for i, point in enumerate(points):
        steps, acc = values(point["eval"]["step"]), [100.0 * v for v in values(point["eval"]["accuracy"])]
        if not finite(acc):
            continue
        drawn += finite(acc)
        if start is not None:  # every point starts from the shared warm start
            steps, acc = [0.0] + steps, [100.0 * start] + acc
        ax.plot(steps, acc, LINE_STYLES[(i // 10) % len(LINE_STYLES)], color=colors[i], marker="o", markersize=4,
                label=point["name"])
    any_data = len(drawn) > (0 if start is None else 1)
    if start is not None:
        ax.plot([0], [100.0 * start], "k*", markersize=12, label="shared warm start (SFT)", zorder=5)
    if drawn:  # the band the curves span, so their differences show
        low, high = min(drawn), max(drawn)
        pad = max(2.0, 0.15 * (high - low))
        top = min(100.0, high + pad)
        ax.set_ylim(low - pad if low - pad > 0 else -0.02 * top, top)  # a curve at 0 % stays off the frame
    else:
        ax.set_ylim(0, 100)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("held-out accuracy (%)")
    ax.grid(alpha=0.3)
    if any_data:
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    else:
        ax.text(0.5, 0.5, "no evaluation recorded", ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_title("greedy held-out accuracy, every point from the same start")
    save(fig, out_dir, "accuracy", written)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_mismatch.py PLOT_DATA_JSON OUT_DIR")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    if not data.get("points"):
        sys.exit(sys.argv[1] + ": no points")
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    written = []
    plot_buckets(data, out_dir, written)
    plot_k3_over_steps(data, out_dir, written)
    plot_report.plot_mismatch_steps(data["points"], out_dir, written)
    plot_report.plot_mismatch_stages(data["points"], out_dir, written)
    plot_accuracy(data, out_dir, written)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
