#!/usr/bin/env python3
"""The summary of a scripts/device_check.sh run, rewritten after every step (so a run cut off at any point still
leaves one): reads the work directory's steps.jsonl (one record per step, the last record of a name wins), each
gtest step's JSON report or, where the binary never wrote it (killed, crashed), its log, and writes the summary
JSON; with --print, a short table on stdout. Tolerant of anything cut short: a truncated log or JSON, a step
still running, a missing file.

  device_summary.py WORK_DIR SUMMARY_JSON [--print]
"""
import json
import os
import re
import sys

# Cases that skip on a one-GPU machine by design: the subscriber half of the cuda-ipc cases (run only by them), and
# the cases of a second GPU.
SUBSCRIBER_CASE = "CudaIpcSubscriberProcess.Serves"


def needs_second_gpu(case):
    return case.endswith("/AnotherGpu") or "TwoGpus" in case


def read_text(path, limit=None):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return text if limit is None else text[-limit:]


def read_records(work):
    steps, order = {}, []
    for line in read_text(os.path.join(work, "steps.jsonl")).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short
        if not isinstance(record, dict) or "name" not in record:
            continue
        if record["name"] not in steps:
            order.append(record["name"])
        steps[record["name"]] = record
    return [steps[n] for n in order]


CASE_LINE = re.compile(r"^\[\s*(RUN|OK|FAILED|SKIPPED)\s*\] ([A-Za-z0-9_/.]+\.[A-Za-z0-9_/]+)")


def cases_from_log(text):
    """gtest's plain output: each case's last state, and the case that started and never ended (a hang or crash)."""
    state, running = {}, None
    for line in text.splitlines():
        m = CASE_LINE.match(line)
        if not m:
            continue
        what, case = m.groups()
        if what == "RUN":
            state[case] = "running"
            running = case
        else:
            state[case] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[what]
            if case == running:
                running = None
    return state, running


def cases_from_json(path):
    try:
        report = json.loads(read_text(path))
    except ValueError:
        return None
    state = {}
    for suite in report.get("testsuites", []):
        for c in suite.get("testsuite", []):
            name = c.get("classname", "") + "." + c.get("name", "")
            if c.get("failures"):
                state[name] = "failed"
            elif c.get("result") == "SKIPPED" or c.get("status") == "NOTRUN":
                state[name] = "skipped"
            else:
                state[name] = "passed"
    return state


def gtest_detail(work, name, gpus):
    state = cases_from_json(os.path.join(work, name + ".json"))
    running = None
    source = "json"
    if state is None:
        state, running = cases_from_log(read_text(os.path.join(work, name + ".log")))
        source = "log"
    detail = {"cases_from": source, "passed": sorted(c for c, s in state.items() if s == "passed"),
              "failed": sorted(c for c, s in state.items() if s == "failed")}
    skipped = [c for c, s in state.items() if s == "skipped" and c != SUBSCRIBER_CASE]
    detail["needs_more_gpus"] = sorted(c for c in skipped if needs_second_gpu(c) and gpus < 2)
    detail["skipped"] = sorted(c for c in skipped if c not in detail["needs_more_gpus"])
    if running:
        detail["unfinished_case"] = running
    return detail


def findings(work):
    """What the GPU answered that is worth keeping whatever the verdict: the matmul math's rounding, the W2 sync."""
    found = []
    for line in read_text(os.path.join(work, "kernels_cuda_ops.log")).splitlines():
        if line.startswith("matmul ") and "operands rounded" in line:
            found.append(line.strip())
    for line in read_text(os.path.join(work, "ipc_w2_sync_time.log")).splitlines():
        if line.startswith("cuda-ipc W2 sync"):
            found.append(line.strip())
    return found


def run_records(work, run, name):
    out = []
    for line in read_text(os.path.join(work, run, name)).splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def same_run(work, a, b):
    """Samples and every metric but the run-dependent ones (timing, engine, memory, layout) equal."""
    skip = ("timing", "elapsed_s", "tokens_per_s", "checkpoint", "engine/", "memory/", "layout/")
    ma, mb = run_records(work, a, "metrics.jsonl"), run_records(work, b, "metrics.jsonl")
    if not ma or len(ma) != len(mb):
        return False
    if run_records(work, a, "samples.jsonl") != run_records(work, b, "samples.jsonl"):
        return False
    strip = lambda m: {k: v for k, v in m.items() if not k.startswith(skip)}
    return all(strip(x) == strip(y) for x, y in zip(ma, mb))


def summarize(work):
    meta = {}
    try:
        meta = json.loads(read_text(os.path.join(work, "meta.json")) or "{}")
    except ValueError:
        pass
    gpus = int(meta.get("gpus", 0))
    steps = read_records(work)
    for step in steps:
        if step.get("kind") == "gtest" and step.get("status") not in ("skipped_no_time", "not_run", "not_selected"):
            step.update(gtest_detail(work, step["name"], gpus))
            # On a GPU machine every GPU case must run: a skip there means the binary did not see the GPU.
            if gpus > 0 and step.get("skipped") and step.get("status") == "passed":
                step["status"] = "failed"
                step["why"] = "skipped on a machine with a GPU"
        if step.get("status") in ("failed", "timed_out", "running"):
            step["log_tail"] = read_text(os.path.join(work, step["name"] + ".log"), 1500)
        elif step.get("kind") == "bench":  # the benchmark's table: its figures and the ratios to its peer
            step["log_tail"] = read_text(os.path.join(work, step["name"] + ".log"), 2500)
    summary = dict(meta)
    summary["steps"] = steps
    summary["findings"] = findings(work)
    evals = [{k: v for k, v in m.items() if k in ("step", "eval/accuracy", "probe/max_abs_dlogp", "reward/mean")}
             for m in run_records(work, "grpo_gpu", "metrics.jsonl") if "eval/accuracy" in m]
    if evals:
        summary["grpo_gpu_evals"] = evals
    sync = {}
    for run in ("split_zmq", "split_cuda_ipc", "split_nccl"):
        ms = [m["timing_s/weight_sync"] for m in run_records(work, run, "metrics.jsonl") if "timing_s/weight_sync" in m]
        if ms:
            sync[run + "_sync_ms"] = [round(1000 * x, 2) for x in ms]
    names = {s["name"]: s for s in steps}
    for other in ("split_cuda_ipc", "split_nccl"):
        if names.get("split_zmq", {}).get("status") == "passed" and names.get(other, {}).get("status") == "passed":
            sync[other + "_equals_zmq"] = same_run(work, "split_zmq", other)
            if not sync[other + "_equals_zmq"]:
                names[other]["status"] = "failed"
                names[other]["why"] = "its samples or metrics differ from the zmq run's"
    summary["weight_sync"] = sync
    statuses = [s.get("status") for s in steps]
    if any(s in ("failed", "timed_out") for s in statuses):
        summary["verdict"] = "fail"
    elif any(s in ("running", "skipped_no_time", "not_run") for s in statuses) or not meta.get("finished"):
        summary["verdict"] = "incomplete"
    else:
        summary["verdict"] = "pass"
    return summary


def print_table(summary):
    print(f"\ndevice_check {summary.get('mode', '?')}: {summary.get('verdict')} "
          f"({summary.get('elapsed_s', '?')} s of a {summary.get('budget_s', '?')} s budget)")
    if summary.get("gpu"):
        print("GPU: " + summary["gpu"].replace("\n", "; "))
    print(f"{'step':26} {'status':15} {'s':>6} {'limit':>5}  cases")
    for s in summary["steps"]:
        cases = ""
        if "passed" in s:
            cases = f"{len(s['passed'])} passed, {len(s['failed'])} failed, {len(s['skipped'])} skipped"
        print(f"{s['name']:26} {s.get('status', '?'):15} {s.get('seconds', '-'):>6} {s.get('limit', '-'):>5}  {cases}")
        for key, label in (("failed", "FAILED"), ("skipped", "skipped"), ("needs_more_gpus", "needs a second GPU")):
            for case in s.get(key, []) if key != "failed" or "passed" in s else []:
                print(f"    {label}: {case}")
        if s.get("unfinished_case"):
            print(f"    unfinished (hung or crashed): {s['unfinished_case']}")
        if s.get("why"):
            print(f"    why: {s['why']}")
    for line in summary.get("findings", []):
        print("  finding: " + line)
    for e in summary.get("grpo_gpu_evals", []):
        print("  grpo_gpu: " + json.dumps(e))
    for k, v in summary.get("weight_sync", {}).items():
        print(f"  weight_sync {k}: {v}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    work, out = sys.argv[1], sys.argv[2]
    summary = summarize(work)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(tmp, out)  # a reader (or a cut) never sees half a summary
    if "--print" in sys.argv[3:]:
        print_table(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
