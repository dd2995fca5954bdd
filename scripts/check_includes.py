#!/usr/bin/env python3
"""The include rule of docs/architecture.md's folder table: each library includes only the folders it may.

rollout/ and trainer/ never include each other (they meet only in model/ and in the wire messages), and no
library includes one above it. Prints every offending line (file:line: folder -> folder) and exits 1 if any.
"""
import os
import re
import sys

import source_check

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "model": {"core", "kernels"},
    "tokenizer": {"core", "model"},
    "rollout": {"core", "kernels", "model", "tokenizer"},
    "reward": {"core"},
    "trainer": {"core", "kernels", "model"},
    "weightsync": {"core", "model"},
    "report": {"core", "model"},
    "agent": {"core", "model", "tokenizer", "reward"},
    "loop": {"core", "kernels", "model", "tokenizer", "rollout", "reward", "trainer", "weightsync", "report",
             "agent"},
    "mismatch": {"core", "kernels", "model", "tokenizer", "rollout", "reward", "trainer", "weightsync", "report",
                 "agent", "loop"},
    "bench": {"core", "kernels", "model", "tokenizer", "rollout", "reward", "trainer", "weightsync", "report",
              "agent", "loop", "mismatch"},
    "apps": {"core", "kernels", "model", "tokenizer", "rollout", "reward", "trainer", "weightsync", "report",
             "agent", "loop", "mismatch", "bench"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def self_test():
    """The check fails on a tree that breaks the rule, and passes on one that keeps it."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "trainer"))
        os.makedirs(os.path.join(root, "rollout"))
        with open(os.path.join(root, "rollout", "engine.h"), "w") as f:
            f.write('#include "model/transformer.h"\n')
        with open(os.path.join(root, "trainer", "loss.cpp"), "w") as f:
            f.write('#include "core/error.h"\n')
        ok = subprocess.run([sys.executable, __file__, root], capture_output=True, text=True)
        with open(os.path.join(root, "trainer", "loss.cpp"), "a") as f:
            f.write('  #include "rollout/engine.h"\n')
        broken = subprocess.run([sys.executable, __file__, root], capture_output=True, text=True)
    if ok.returncode != 0 or broken.returncode != 1 or "trainer/loss.cpp:2: trainer/ includes rollout/" not in broken.stdout:
        print(f"check_includes self-test FAILED:\n{ok.stdout}\n{broken.stdout}")
        return 1
    print("check_includes self-test: a trainer/ -> rollout/ include is caught")
    return 0


def check(root):
    bad = []
    files = 0
    for folder, allowed in ALLOWED.items():
        top = os.path.join(root, folder)
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                files += 1
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) in ALLOWED and m.group(1) != folder and m.group(1) not in allowed:
                            bad.append(f"{os.path.relpath(path, root)}:{number}: {folder}/ includes {m.group(1)}/ "
                                       f"(it may include: {', '.join(sorted(allowed)) or 'nothing'})")
    return bad, f"{files} files, {len(bad)} includes against docs/architecture.md's folder table"


if __name__ == "__main__":
    sys.exit(source_check.run("check_includes", check, self_test))
