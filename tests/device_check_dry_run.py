#!/usr/bin/env python3
"""The GPU check's script logic on a machine without a GPU (ctest label `device_script`): scripts/device_check.sh
against a bundle packed here from this build (scripts/device_bundle.sh --from), in its dry-run mode, where every
GPU case skips and the GPU runs fail at once. What it proves, with a hang planted by RLCPP_DEVICE_CHECK_STALL:
  - a step that outlives its limit is recorded as timed out, and the next step still runs;
  - a call cut off mid-step (SIGKILL to the whole process group, as the device tool's limit would) leaves the log
    of every step so far, the summary naming the step that was running, and the packed results;
  - the global deadline ends a stalled step in time and records the steps it leaves out as skipped;
  - at most 8 files are left under $OUT (the device tool returns no more);
  - a rerun of chosen steps (RLCPP_DEVICE_CHECK_ONLY) runs those alone and records the rest as not selected;
  - the summary survives a truncated log (the case that never ended named), a cut record, and judges skips on a
    GPU machine as failures except the cases of a second GPU.
Only the GPU's answers wait for a GPU.

  device_check_dry_run.py BUILD_DIR
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_STEPS = ["smoke", "kernels_cuda_ops", "op_matrix", "attention_cuda", "model_cuda", "rollout_cuda", "trainer_cuda",
               "grpo_gpu", "split_zmq", "split_cuda_ipc", "ipc_same_gpu", "ipc_w2_sync_time", "nccl_world_of_one",
               "nccl_join_timeout", "trainer_nccl"]
failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)


def environment(out, bundle, **extra):
    env = dict(os.environ)
    env.update({"OUT": out, "RLCPP_DEVICE_BUNDLE": bundle, "RLCPP_DEVICE_CHECK_DRY_RUN": "1"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def summary_of(out):
    with open(os.path.join(out, "device_check.json")) as f:
        return json.load(f)


def steps_of(summary):
    return {s["name"]: s for s in summary["steps"]}


def files_under(out):
    return sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)


def run_check(out, bundle, timeout, **extra):
    start = time.monotonic()
    p = subprocess.run([os.path.join(ROOT, "scripts/device_check.sh"), "first"], cwd=ROOT, env=environment(
        out, bundle, **extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p, time.monotonic() - start


def stalled_step_times_out_and_the_next_runs(tmp, bundle):
    out = os.path.join(tmp, "out_stall")
    p, _ = run_check(out, bundle, 400, RLCPP_DEVICE_CHECK_STALL="model_cuda", RLCPP_DEVICE_CHECK_LIMIT_MODEL_CUDA=3)
    print(p.stdout[-3000:])
    summary = summary_of(out)
    steps = steps_of(summary)
    check(p.returncode != 0, "a run with a timed-out step exits non-zero")
    check([s["name"] for s in summary["steps"]] == FIRST_STEPS, "every step of `first` is recorded, in order")
    check(steps["smoke"]["status"] == "passed", "the basics pass in a dry run (no GPU: reported, not fatal)")
    check(steps["model_cuda"]["status"] == "timed_out" and steps["model_cuda"]["limit"] == 3,
          "the stalled step is recorded as timed out at its limit")
    check(steps["rollout_cuda"]["status"] == "passed" and steps["rollout_cuda"].get("skipped"),
          "the step after it still ran (its GPU cases skipped without a GPU)")
    check(steps["grpo_gpu"]["status"] == "failed" and
          "config key 'device' = 'cuda': no usable CUDA device" in steps["grpo_gpu"].get("log_tail", ""),
          "the GPU run's config is accepted and it fails at once for want of a GPU, its log's tail kept")
    check(summary["verdict"] == "fail", "the verdict is fail")
    log = open(os.path.join(out, "device_check.log"), errors="replace").read()
    check(0 <= log.find("===== model_cuda") < log.find("===== rollout_cuda"), "the log holds each step in order")
    check(all(f"device_check: {name}" in p.stdout for name in FIRST_STEPS),
          "a status line per step on stdout")
    files = files_under(out)
    check(len(files) <= 8 and {"device_check.log", "device_check.json", "results.tar.gz"} <= set(files),
          f"at most 8 files under $OUT: {files}")
    listing = subprocess.run(["tar", "-tzf", os.path.join(out, "results.tar.gz")], stdout=subprocess.PIPE,
                             text=True).stdout
    check("./rollout_cuda.json" in listing and "./model_cuda.log" in listing,
          "the packed results hold each step's gtest JSON and log")


def interrupted_call_leaves_partial_results(tmp, bundle):
    out = os.path.join(tmp, "out_cut")
    p = subprocess.Popen([os.path.join(ROOT, "scripts/device_check.sh")], cwd=ROOT,
                         env=environment(out, bundle, RLCPP_DEVICE_CHECK_STALL="trainer_cuda"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    running = False
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None and not running:
        time.sleep(0.5)
        try:
            running = steps_of(summary_of(out)).get("trainer_cuda", {}).get("status") == "running"
        except (OSError, ValueError):
            pass
    os.killpg(p.pid, signal.SIGKILL)  # the device tool's limit: everything in the call, at once
    p.wait()
    check(running, "the summary names the stalled step as running while it runs")
    summary = summary_of(out)
    steps = steps_of(summary)
    check(summary["verdict"] == "incomplete", "a call cut off mid-step is judged incomplete")
    check(all(steps[n]["status"] == "passed" for n in ("smoke", "kernels_cuda_ops", "model_cuda", "rollout_cuda")),
          "the steps before the cut keep their results")
    check(steps["trainer_cuda"]["status"] == "running", "the step that was cut off is named")
    log = open(os.path.join(out, "device_check.log"), errors="replace").read()
    check("===== rollout_cuda" in log and "===== trainer_cuda" in log, "the log holds every step so far")
    listing = subprocess.run(["tar", "-tzf", os.path.join(out, "results.tar.gz")], stdout=subprocess.PIPE,
                             text=True).stdout
    check("./rollout_cuda.log" in listing, "the results packed after the last finished step are there")


def deadline_ends_the_stall_and_skips_the_rest(tmp, bundle):
    out = os.path.join(tmp, "out_deadline")
    p, seconds = run_check(out, bundle, 200, RLCPP_DEVICE_CHECK_STALL="kernels_cuda_ops",
                           RLCPP_DEVICE_CHECK_BUDGET_S=40)
    steps = steps_of(summary_of(out))
    check(steps["kernels_cuda_ops"]["status"] == "timed_out" and steps["kernels_cuda_ops"]["limit"] <= 20,
          f"the stalled step's limit is what the deadline leaves ({steps['kernels_cuda_ops']['limit']} s)")
    check(steps["trainer_nccl"]["status"] == "skipped_no_time", "the steps past the deadline are skipped, named")
    check(seconds < 40 + 30, f"the call ends near its budget ({seconds:.0f} s of 40)")
    check(p.returncode != 0, "and exits non-zero")


def rerun_runs_the_selected_steps_alone(tmp, bundle):
    out = os.path.join(tmp, "out_only")
    p, _ = run_check(out, bundle, 200, RLCPP_DEVICE_CHECK_ONLY="smoke,model_cuda")
    summary = summary_of(out)
    steps = steps_of(summary)
    check([s["name"] for s in summary["steps"]] == FIRST_STEPS, "a rerun still records every step, in order")
    check(steps["smoke"]["status"] == "passed" and steps["model_cuda"]["status"] == "passed",
          "the selected steps run")
    check(all(steps[n]["status"] == "not_selected" for n in FIRST_STEPS if n not in ("smoke", "model_cuda")),
          "the others are recorded as not selected, not run")
    log = open(os.path.join(out, "device_check.log"), errors="replace").read()
    check("===== model_cuda" in log and "===== rollout_cuda" not in log, "the log holds the selected steps only")
    check(p.returncode == 0 and summary["verdict"] == "pass", "a rerun whose selected steps pass passes")


def bench_call_runs_each_benchmark(tmp, bundle):
    out = os.path.join(tmp, "out_bench")
    p = subprocess.run([os.path.join(ROOT, "scripts/device_check.sh"), "bench"], cwd=ROOT,
                       env=environment(out, bundle), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=300)
    steps = summary_of(out)["steps"]
    check(p.returncode != 0 and len(steps) == 8 and all(s["status"] == "failed" for s in steps) and
          all("--device = 'cuda'" in s.get("log_tail", "") and "CUDA" in s["log_tail"] for s in steps),
          "the bench call runs its 8 benchmarks, each refused at once without a GPU")
    check(len(files_under(out)) <= 8, "the bench call leaves at most 8 files too")


def bundle_guards_refuse_other_builds(tmp):
    fake = os.path.join(tmp, "fake_build")
    os.makedirs(fake)
    with open(os.path.join(fake, "CMakeCache.txt"), "w") as f:
        f.write("RLCPP_MARCH:STRING=native\n")
    p = subprocess.run([os.path.join(ROOT, "scripts/device_bundle.sh")], cwd=ROOT,
                       env=dict(os.environ, RLCPP_BUILD_DIR=fake), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    check(p.returncode == 1 and "RLCPP_MARCH=native" in p.stdout and "x86-64-v3" in p.stdout,
          "the bundle refuses a build directory configured for another -march, before building")


def summary_survives_a_truncated_log(tmp):
    work, out = os.path.join(tmp, "work"), os.path.join(tmp, "summary.json")
    os.makedirs(work)
    with open(os.path.join(work, "steps.jsonl"), "w") as f:
        f.write('{"name": "hung", "kind": "gtest", "status": "running", "rc": null, "seconds": 0.0, "limit": 9}\n')
        f.write('{"name": "hung", "kind": "gtest", "status": "timed_out", "rc": 124, "seconds": 9.0, "limit": 9}\n')
        f.write('{"name": "skips", "kind": "gtest", "status": "passed", "rc": 0, "seconds": 1.0, "limit": 9}\n')
        f.write('{"name": "cut", "kind": "gtest", "sta')  # a record cut short
    with open(os.path.join(work, "hung.log"), "wb") as f:
        f.write(b"[ RUN      ] Suite.Fine\n[       OK ] Suite.Fine (3 ms)\n[ RUN      ] Suite.Bad\n"
                b"[  FAILED  ] Suite.Bad (1 ms)\n[ RUN      ] Suite.Hangs\nhalf a li\xc3")
    with open(os.path.join(work, "skips.json"), "w") as f:
        json.dump({"testsuites": [{"testsuite": [
            {"classname": "A", "name": "Gpu", "result": "SKIPPED"},
            {"classname": "P/B", "name": "X/AnotherGpu", "result": "SKIPPED"},
            {"classname": "CudaIpcSubscriberProcess", "name": "Serves", "result": "SKIPPED"}]}]}, f)
    with open(os.path.join(work, "meta.json"), "w") as f:
        json.dump({"gpus": 1, "finished": 1}, f)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/device_summary.py"), work, out, "--print"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout)
    check(p.returncode == 0, "the summary is written from a truncated log and a cut record")
    steps = steps_of(json.load(open(out)))
    hung = steps["hung"]
    check(hung["status"] == "timed_out" and hung["unfinished_case"] == "Suite.Hangs" and
          hung["passed"] == ["Suite.Fine"] and hung["failed"] == ["Suite.Bad"],
          "the case that never ended is named, the others counted from the log")
    check(steps["skips"]["status"] == "failed" and steps["skips"]["skipped"] == ["A.Gpu"] and
          steps["skips"]["needs_more_gpus"] == ["P/B.X/AnotherGpu"],
          "a skip on a GPU machine fails the step; a second GPU's case and the subscriber's do not")
    check("unfinished (hung or crashed): Suite.Hangs" in p.stdout, "the table names it too")


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
    with tempfile.TemporaryDirectory(prefix="rlcpp_device_dry_run.") as tmp:
        summary_survives_a_truncated_log(tmp)
        bundle = os.path.join(tmp, "bundle.tar")
        env = dict(os.environ, RLCPP_BUNDLE_WARM_START_STEPS="4")
        made = subprocess.run([os.path.join(ROOT, "scripts/device_bundle.sh"), "--from", build, "--out", bundle],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(made.stdout[-2000:])
        check(made.returncode == 0, "a dry-run bundle is packed from this build")
        if made.returncode != 0:
            return 1
        listing = subprocess.run(["tar", "-tf", bundle], stdout=subprocess.PIPE, text=True).stdout.split()
        check("./warm_start/model.safetensors" in listing and "./unguarded" in listing,
              "it carries the warm-start checkpoint and says it is unguarded")
        stalled_step_times_out_and_the_next_runs(tmp, bundle)
        interrupted_call_leaves_partial_results(tmp, bundle)
        deadline_ends_the_stall_and_skips_the_rest(tmp, bundle)
        rerun_runs_the_selected_steps_alone(tmp, bundle)
        bench_call_runs_each_benchmark(tmp, bundle)
        bundle_guards_refuse_other_builds(tmp)
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("device_check dry run: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
