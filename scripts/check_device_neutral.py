#!/usr/bin/env python3
"""The device rule of docs/architecture.md's "Folders": the algorithm, loop and channel code passes the execution
context on and asks it what its memory can do (ExecContext::is_host, is_gpu, holds, runs_on; Tensor::on_host;
DeviceSpec::is_host, is_gpu; all in core/), never which device it is on.

In rollout/, trainer/, loop/, weightsync/ (but weightsync/cuda/, the CUDA-only half), agent/, reward/, report/ and
bench/ (but bench/peers/), a `Device::k...` or a comparison with a `device()` is a branch on the device. Comments
and string literals are not code; test files are not checked. Prints every offending line (file:line: what) and
exits 1 if any.
"""
import os
import re
import sys

import source_check

FOLDERS = ["model", "rollout", "trainer", "loop", "weightsync", "agent", "reward", "report", "bench"]
EXEMPT = ["weightsync/cuda", "bench/peers"]  # may name devices: they are one device's code
# model/'s executors are where the model's passes meet the devices (model/executor.h); every other model/ file is
# the model's math, its weights and their files.
EXEMPT_FILES = ["model/executor.cpp", "model/cpu_executor.h", "model/cpu_executor.cpp", "model/cuda_executor.h",
                "model/cuda_executor.cpp"]
SOURCE = (".h", ".cpp", ".cu", ".cuh")
RULES = [
    (re.compile(r"\bDevice::k\w*"), "names a device"),
    (re.compile(r"\bdevice\(\)\s*[!=]=|[!=]=\s*[\w.>()\[\]-]*\bdevice\(\)"), "compares a device()"),
]


def code_only(lines):
    """Each line with its comments and the insides of its string and character literals blanked."""
    in_block = False
    for line in lines:
        out = []
        i = 0
        while i < len(line):
            if in_block:
                end = line.find("*/", i)
                if end < 0:
                    break
                in_block = False
                i = end + 2
                continue
            c = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                in_block = True
                i += 2
                continue
            if c in "\"'":
                j = i + 1
                while j < len(line) and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                out.append(c + c)
                i = j + 1
                continue
            out.append(c)
            i += 1
        yield "".join(out)


def is_test(name):
    return name.endswith(("_test.cpp", "_test.h"))


def check(root):
    bad = []
    files = 0
    for folder in FOLDERS:
        for dirpath, dirnames, names in os.walk(os.path.join(root, folder)):
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            dirnames[:] = sorted(d for d in dirnames if f"{rel_dir}/{d}" not in EXEMPT)
            for name in sorted(names):
                if not name.endswith(SOURCE) or is_test(name) or f"{rel_dir}/{name}" in EXEMPT_FILES:
                    continue
                files += 1
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    for number, line in enumerate(code_only(f), 1):
                        found = [f"{what} ('{m.group(0).strip()}')" for pattern, what in RULES
                                 for m in [pattern.search(line)] if m]
                        if found:
                            bad.append(f"{rel_dir}/{name}:{number}: {', '.join(found)}: pass the context and ask it "
                                       f"what its memory can do (core/exec_context.h), or move this into core/")
    return bad, (f"{files} files, {len(bad)} device branches in the model's math and the algorithm, loop and "
                 f"channel folders (docs/architecture.md's folder table)")


def self_test():
    """The check fails on a tree that branches on the device, and passes on one that asks the context."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text, mode="w"):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), mode) as f:
                f.write(text)
        write("rollout/engine.cpp", "  if (logits.on_host()) return logits;  // was: == Device::kCPU\n"
                                    '  RLCPP_CHECK(ctx.is_gpu(), "device() == Device::kCUDA");\n')
        write("weightsync/cuda/nccl_broadcast.cpp", "  RLCPP_CHECK(ctx.device() == Device::kCUDA, \"\");\n")
        write("bench/peers/peer.cpp", "  Device d = Device::kCPU;\n")
        write("trainer/update_step_test.cpp", "  EXPECT_EQ(t.device(), Device::kCPU);\n")
        write("trainer/update_step.cpp", "/* Device::kCPU\n   was here */\n")
        good, _ = check(root)
        write("trainer/update_step.cpp", "  if (context_.device() != Device::kCPU) {}\n", "a")
        write("loop/probe.cpp", "\n  const bool same = engine == exec.device();\n")
        broken, _ = check(root)
    want = ["trainer/update_step.cpp:3: names a device ('Device::kCPU'), compares a device() ('device() !=')",
            "loop/probe.cpp:2: compares a device() ('== exec.device()')"]
    if good or len(broken) != len(want) or not all(any(b.startswith(w) for b in broken) for w in want):
        print("check_device_neutral self-test FAILED:\n" + "\n".join(good + ["--"] + broken))
        return 1
    print("check_device_neutral self-test: a Device::k... and device() comparisons in trainer/ and loop/ are caught; "
          "comments, strings, tests, weightsync/cuda/ and bench/peers/ are not")
    return 0


if __name__ == "__main__":
    sys.exit(source_check.run("check_device_neutral", check, self_test))
