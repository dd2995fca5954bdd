#!/usr/bin/env python3
"""Draws the plots of `rlcpp report`: plot_report.py PLOT_DATA_JSON OUT_DIR.

PLOT_DATA_JSON is written by rlcpp (report/run_report.cpp): {"runs": [series, ...]}, every series computed there,
null where a step lacks a figure. This script only draws, one PNG per figure, every run on the same axes
(labelled by its run directory's name), and prints the files it wrote: the seven plots of every report, and
mismatch_steps, mismatch_buckets and mismatch_stages when some run has a mismatch (its "mismatch_section";
plot_mismatch.py draws mismatch_steps and mismatch_stages the same way for a sweep's points). Needs matplotlib (Debian's python3-matplotlib,
installed by scripts/ensure_deps.sh); runs headless.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 100
PHASE_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#bbbbbb"]


def values(xs):
    """JSON nulls as NaN, so matplotlib leaves gaps."""
    return [math.nan if v is None else float(v) for v in xs]


def finite(xs):
    return [v for v in values(xs) if math.isfinite(v)]


def step_axis(ax):
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def note_if_empty(ax, has_data, text):
    if not has_data:
        ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")


def save(fig, out_dir, name, written):
    path = os.path.join(out_dir, name + ".png")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    written.append(path)


def against_step_and_time(runs, out_dir, name, title, ylabel, pick, written, percent=False, extra=None):
    """One figure, two panels: the series against the step and against wall time (and `extra`'s, dashed)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    any_data, top = False, 0.0
    for run in runs:
        steps, times, ys = pick(run)
        if not finite(ys):
            continue
        any_data = True
        scale = 100.0 if percent else 1.0
        ys = [scale * v for v in values(ys)]
        top = max([top] + finite(ys))
        marker = "o" if len(ys) <= 30 else None
        axes[0].plot(values(steps), ys, marker=marker, label=run["label"])
        axes[1].plot(values(times), ys, marker=marker, label=run["label"])
        if extra is not None and finite(extra(run)):
            more = [scale * v for v in values(extra(run))]
            top = max([top] + finite(more))
            axes[0].plot(values(steps), more, linestyle="--", label=run["label"] + " (tool calls)")
            axes[1].plot(values(times), more, linestyle="--", label=run["label"] + " (tool calls)")
    step_axis(axes[0])
    axes[1].set_xlabel("wall time since the start (s)")
    for ax in axes:
        if percent:  # 0 % at the bottom, and an accuracy of 0 still draws a readable axis
            high = max(5.0, 1.1 * top)
            ax.set_ylim(-0.02 * high, high)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        note_if_empty(ax, any_data, "no " + title.lower() + " in these runs")
        if any_data:
            ax.legend()
    fig.suptitle(title)
    save(fig, out_dir, name, written)


def plot_phase_shares(runs, out_dir, written):
    """Each step's phase shares stacked; one panel per run (stacks cannot overlay). Stacked areas, not bars: a
    few hundred narrow bars alias into white stripes."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3.2 * len(runs)), squeeze=False)
    for ax, run in zip(axes[:, 0], runs):
        steps = values(run["step"])
        names, shares = run["phases"]["names"], run["phases"]["shares"]
        rows = [[0.0 if math.isnan(v) else 100.0 * v for v in values(row)] for row in shares]
        colors = [PHASE_COLORS[i % len(PHASE_COLORS)] for i in range(len(names))]
        if len(steps) == 1:  # an area needs two points
            bottom = 0.0
            for name, row, color in zip(names, rows, colors):
                ax.bar(steps, row, width=0.8, bottom=bottom, label=name, color=color)
                bottom += row[0]
        else:
            ax.stackplot(steps, *rows, labels=names, colors=colors, step="mid", linewidth=0)
        ax.set_ylim(0, 105)
        ax.set_ylabel("share of step time (%)")
        step_axis(ax)
        ax.set_title(run["label"])
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    save(fig, out_dir, "phase_shares", written)


def plot_throughput(runs, out_dir, written):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = [("rollout_tokens_per_s", "rollout: sampled tokens/s"),
              ("train_tokens_per_s", "training: trained tokens/s (forward + backward)")]
    for ax, (key, title) in zip(axes, panels):
        any_data = False
        for run in runs:
            ys = values(run[key])
            if finite(ys):
                any_data = True
                ax.plot(values(run["step"]), ys, marker="o" if len(ys) <= 30 else None, label=run["label"])
        ax.set_title(title)
        step_axis(ax)
        ax.set_ylabel("tokens/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        note_if_empty(ax, any_data, "not recorded")
        if any_data:
            ax.legend()
    save(fig, out_dir, "throughput", written)


def plot_mismatch(runs, out_dir, written):
    metrics = [("max_abs_dlogp", "max |Δlogp|"), ("mean_abs_dp", "mean |Δp|"), ("k3", "k3 KL")]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes, metrics):
        positive, zeros, recorded = [], 0, False
        for i, run in enumerate(runs):
            color = colors[i % len(colors)]
            for source, style in [("rollout", "-"), ("probe", "--")]:
                ys = [abs(v) for v in values(run["mismatch"][key][source])]
                if not finite(ys):
                    continue
                recorded = True
                zeros += sum(1 for v in ys if v == 0)
                # A log axis has no 0: bit-identical steps leave a gap and are counted in the title.
                ys = [v if v > 0 else math.nan for v in ys]
                positive += finite(ys)
                ax.plot(values(run["step"]), ys, style, color=color, marker="o" if len(ys) <= 30 else None,
                        markersize=3, label=run["label"] + (" (sync check)" if source == "probe" else ""))
        if positive:
            ax.set_yscale("log")
            # At least one whole decade, so the axis carries labelled powers of ten.
            low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
            ax.set_ylim(10.0 ** low, 10.0 ** max(high, low + 1))
            ax.legend(fontsize="small")
        elif recorded:
            ax.text(0.5, 0.5, "0 at every step: bit-identical", ha="center", va="center", transform=ax.transAxes)
        note_if_empty(ax, recorded, "not recorded")
        ax.set_title(title + (f" ({zeros} points = 0, not drawn)" if zeros and positive else ""))
        step_axis(ax)
        ax.grid(alpha=0.3)
    fig.suptitle("engine vs trainer log-probs of the same tokens (dashed: the sync check after each weight sync, "
                 "engine vs trainer in the engine's numerics: 0 by design)")
    save(fig, out_dir, "mismatch", written)


def log_axis(ax, positive):
    """A log axis over whole decades around the positive values (at least one decade)."""
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ax.set_yscale("log")
    ax.set_ylim(10.0 ** low, 10.0 ** max(high, low + 1))


def plot_mismatch_steps(runs, out_dir, written):
    """k3 KL and full-vocabulary TV over the steps: the step's samples solid, the probe batch dashed."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panels = [(("k3_kl", "probe_k3"), "k3 KL(rollout ‖ trainer) of the sampled tokens"),
              (("full_tv", "probe_full_tv"), "total variation of the whole next-token distributions")]
    for ax, (keys, title) in zip(axes, panels):
        positive = []
        for i, run in enumerate(runs):
            section = run["mismatch_section"]
            if not section["present"]:
                continue
            for key, style, what in zip(keys, ["-", "--"], ["step's samples", "probe batch"]):
                ys = [v if v > 0 else math.nan for v in values(section[key])]
                if finite(ys):
                    positive += finite(ys)
                    ax.plot(values(run["step"]), ys, style, color=colors[i % len(colors)],
                            marker="o" if len(ys) <= 30 else None, markersize=3, label=f"{run['label']} ({what})")
        if positive:
            log_axis(ax, positive)
            ax.legend(fontsize="small")
        note_if_empty(ax, bool(positive), "not recorded (no full-vocabulary comparison in these numerics)")
        ax.set_title(title, fontsize="medium")
        step_axis(ax)
        ax.grid(alpha=0.3)
    fig.suptitle("size of the mismatch over the run")
    save(fig, out_dir, "mismatch_steps", written)


def plot_mismatch_buckets(runs, out_dir, written):
    """By the rollout's probability of the token: k3 per token (log), and each bucket's share of the tokens
    against its share of the k3 sum."""
    present = [run for run in runs if run["mismatch_section"]["present"]]
    labels = present[0]["mismatch_section"]["buckets"]["labels"] if present else []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    width = 0.8 / max(1, len(present))
    positive = []
    for i, run in enumerate(present):
        b = run["mismatch_section"]["buckets"]
        xs = [x + (i - (len(present) - 1) / 2) * width for x in range(len(labels))]
        k3 = [v if v > 0 else math.nan for v in values(b["k3_kl"])]
        positive += finite(k3)
        axes[0].bar(xs, [0 if math.isnan(v) else v for v in k3], width=width, color=colors[i % len(colors)],
                    label=run["label"])
        half = width / 2
        axes[1].bar([x - half / 2 for x in xs], [100 * v for v in values(b["token_share"])], width=half,
                    color=colors[i % len(colors)], alpha=0.45, label=f"{run['label']}: share of the tokens")
        axes[1].bar([x + half / 2 for x in xs], [100 * v for v in values(b["k3_share"])], width=half,
                    color=colors[i % len(colors)], label=f"{run['label']}: share of the k3 sum")
    if positive:
        log_axis(axes[0], positive)
    note_if_empty(axes[0], bool(positive), "no bucket figures recorded")
    axes[0].set_title("k3 KL per token, by bucket", fontsize="medium")
    axes[1].set_title("where the mismatch sits: tokens vs k3 sum", fontsize="medium")
    axes[1].set_ylabel("% of the run's")
    axes[1].set_ylim(0, 105)
    for ax in axes:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels)
        ax.set_xlabel("rollout probability of the sampled token")
        ax.grid(alpha=0.3, axis="y")
        if present:
            ax.legend(fontsize="small")
    fig.suptitle("mismatch by the rollout's probability of the token")
    save(fig, out_dir, "mismatch_buckets", written)


def plot_mismatch_stages(runs, out_dir, written):
    """max |Δ| of the residual stream after each stage (embedding, layers, final norm, logits), the threshold
    dotted and the first stage past it marked."""
    fig, ax = plt.subplots(figsize=(11, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    positive, names, threshold = [], [], None
    for i, run in enumerate(runs):
        section = run["mismatch_section"]
        if not section["present"]:
            continue
        stages = section["stages"]
        names, threshold = stages["names"], stages["threshold"]
        ys = [v if v > 0 else math.nan for v in values(stages["max_abs"])]
        if not finite(ys):
            continue
        positive += finite(ys)
        color = colors[i % len(colors)]
        ax.plot(range(len(ys)), ys, "o-", color=color, label=run["label"])
        if stages["first_stage"] is not None:
            at = names.index(stages["first_stage"])
            ax.axvline(at, color=color, linestyle="--", linewidth=1)
            ax.annotate(f"enters: {stages['first_stage']}", (at, ys[at]), xytext=(6, 6),
                        textcoords="offset points", color=color, fontsize="small")
    if positive:
        log_axis(ax, positive + ([threshold] if threshold else []))
        if threshold:
            ax.axhline(threshold, color="#444444", linestyle=":", linewidth=1,
                       label=f"probe.layer_threshold {threshold:g}")
        ax.legend(fontsize="small")
    note_if_empty(ax, bool(positive), "no stage comparison recorded (same forward numerics on both sides)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30 if len(names) > 8 else 0)
    ax.set_xlabel("stage of the forward")
    ax.set_ylabel("max |Δ| between the two numerics")
    ax.grid(alpha=0.3)
    ax.set_title("where the mismatch enters (probe batch, mean over the probes)")
    save(fig, out_dir, "mismatch_stages", written)


def plot_response_length(runs, out_dir, written):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    any_mean = False
    for i, run in enumerate(runs):
        color = colors[i % len(colors)]
        lengths = run["response_length"]
        steps, mean = values(run["step"]), values(lengths["mean"])
        if not finite(mean):
            continue
        any_mean = True
        axes[0].fill_between(steps, values(lengths["min"]), values(lengths["max"]), color=color, alpha=0.15)
        axes[0].plot(steps, mean, color=color, label=run["label"] + " mean")
        axes[0].plot(steps, values(lengths["p90"]), ":", color=color, label=run["label"] + " p90")
    axes[0].set_title("per step: mean, 90th percentile, min–max band")
    step_axis(axes[0])
    axes[0].set_ylabel("response tokens")
    axes[0].grid(alpha=0.3)
    note_if_empty(axes[0], any_mean, "not recorded")
    if any_mean:
        axes[0].legend(fontsize="small")

    any_hist = False
    for i, run in enumerate(runs):
        steps, tokens = values(run["sampled_lengths"]["step"]), values(run["sampled_lengths"]["tokens"])
        if not tokens:
            continue
        any_hist = True
        middle = (min(steps) + max(steps)) / 2
        halves = [("first half", [t for s, t in zip(steps, tokens) if s <= middle]),
                  ("second half", [t for s, t in zip(steps, tokens) if s > middle])]
        edges = [b - 0.5 for b in range(int(min(tokens)), int(max(tokens)) + 2)]  # one bin per length
        for (name, ts), style in zip(halves, ["bar", "step"]):
            if ts:
                axes[1].hist(ts, bins=edges, histtype=style, alpha=0.5 if style == "bar" else 1.0,
                             color=colors[i % len(colors)], label=f"{run['label']} {name}", linewidth=1.5)
    axes[1].set_title("samples.jsonl responses")
    axes[1].set_xlabel("response tokens")
    axes[1].set_ylabel("responses")
    note_if_empty(axes[1], any_hist, "no samples.jsonl")
    if any_hist:
        axes[1].legend(fontsize="small")
    save(fig, out_dir, "response_length", written)


def plot_memory(runs, out_dir, written):
    fig, ax = plt.subplots(figsize=(8, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    any_data = False
    for i, run in enumerate(runs):
        color = colors[i % len(colors)]
        rss, peak = values(run["rss_bytes"]), values(run["peak_rss_bytes"])
        marker = "o" if len(rss) <= 30 else None
        if finite(rss):
            any_data = True
            ax.plot(values(run["step"]), [v / 2**20 for v in rss], marker=marker, color=color,
                    label=run["label"] + " resident (VmRSS)")
        if finite(peak):
            any_data = True
            ax.plot(values(run["step"]), [v / 2**20 for v in peak], ":", color=color,
                    label=run["label"] + " peak resident (VmHWM)")
        rule = run["training_memory_formula_bytes"]
        if rule is not None:
            ax.axhline(rule / 2**20, linestyle="--", color=color, label=run["label"] + " 16 B/parameter rule")
    step_axis(ax)
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    note_if_empty(ax, any_data, "resident memory not recorded")
    ax.set_title("trainer process memory")
    save(fig, out_dir, "memory", written)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_report.py PLOT_DATA_JSON OUT_DIR")
    with open(sys.argv[1]) as f:
        runs = json.load(f)["runs"]
    if not runs:
        sys.exit(sys.argv[1] + ": no runs")
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    written = []
    against_step_and_time(runs, out_dir, "reward", "Mean reward", "mean reward of the rollout batch",
                          lambda r: (r["step"], r["elapsed_s"], r["reward_mean"]), written)
    against_step_and_time(runs, out_dir, "accuracy", "Held-out accuracy", "accuracy (%)",
                          lambda r: (r["eval"]["step"], r["eval"]["elapsed_s"], r["eval"]["accuracy"]), written,
                          percent=True)
    plot_phase_shares(runs, out_dir, written)
    plot_throughput(runs, out_dir, written)
    plot_mismatch(runs, out_dir, written)
    if any(run["mismatch_section"]["present"] for run in runs):
        plot_mismatch_steps(runs, out_dir, written)
        plot_mismatch_buckets(runs, out_dir, written)
        plot_mismatch_stages(runs, out_dir, written)
    plot_response_length(runs, out_dir, written)
    plot_memory(runs, out_dir, written)
    against_step_and_time(runs, out_dir, "agent", "Agent episodes: turns and tool calls",
                          "per episode (solid: turns, dashed: tool calls)",
                          lambda r: (r["step"], r["elapsed_s"], r["agent"]["turns_mean"]), written,
                          extra=lambda r: r["agent"]["tool_calls"])
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
