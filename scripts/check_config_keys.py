#!/usr/bin/env python3
"""Every config key `rlcpp config` lists is read by the code.

A config section is a struct whose `visit(V& v)` names each key: `v("key", member, "help")`. A key is read when
its member is used anywhere but in its declaration and that visit call: as `.member` / `->member` in any source
file of the libraries and the CLI, or bare inside the struct itself or one of its `Struct::` member functions
(validate, helpers). A key nothing reads is documented but does nothing — the kind of defect of a
`rollout.sampling.seed` that was listed and ignored. Prints each such key (file:line: key 'K' (member M) ...)
and exits 1 if any.
"""
import os
import re
import sys

import source_check

FOLDERS = ["core", "kernels", "model", "tokenizer", "rollout", "reward", "agent", "trainer", "weightsync", "report",
           "loop", "mismatch", "bench", "apps"]
VISIT = re.compile(r'\bv\(\s*"([A-Za-z0-9_]+)"\s*,\s*([A-Za-z_][A-Za-z0-9_.]*)\s*[,)]')
STRUCT = re.compile(r'^\s*(?:struct|class)\s+([A-Za-z_][A-Za-z0-9_]*)\b[^;]*\{')


def sources(root):
    for folder in FOLDERS:
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if name.endswith((".h", ".cpp", ".cu")):
                    yield os.path.join(dirpath, name)


def struct_spans(lines):
    """(name, first line, last line) of each struct/class by brace depth (0-based, inclusive)."""
    spans, stack, depth = [], [], 0
    for i, line in enumerate(lines):
        m = STRUCT.match(line)
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line.split("//")[0])
        if m:
            stack.append((m.group(1), i, depth))
        depth += code.count("{") - code.count("}")
        while stack and depth <= stack[-1][2]:
            name, start, _ = stack.pop()
            spans.append((name, start, i))
    return spans


def check(root):
    texts = {}
    for path in sources(root):
        with open(path, encoding="utf-8") as f:
            texts[path] = f.read().split("\n")
    keys = []  # (path, line, struct, key, member)
    for path, lines in texts.items():
        spans = struct_spans(lines)
        for i, line in enumerate(lines):
            for m in VISIT.finditer(line):
                owner = [s for s in spans if s[1] <= i <= s[2]]
                struct = owner[-1][0] if owner else ""
                keys.append((path, i, struct, m.group(1), m.group(2).split(".")[0]))
    spans_of = {path: struct_spans(lines) for path, lines in texts.items()}
    joined = {path: "\n".join(lines) for path, lines in texts.items()}
    problems = []
    for path, line_no, struct, key, member in keys:
        dotted = re.compile(r'(?:\.|->)' + re.escape(member) + r'\b')
        bare = re.compile(r'\b' + re.escape(member) + r'\b')
        declaration = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_:<>, ]*[\s&*]' + re.escape(member) + r'\s*(=|;|\{)')
        read = False
        for other, lines in texts.items():
            if member not in joined[other]:
                continue
            own = [(s, e) for name, s, e in spans_of[other] if name == struct] if struct else []
            in_method = False
            for i, line in enumerate(lines):
                code = line.split("//")[0]
                if other == path and i == line_no:
                    continue
                if re.match(r'^\S.*\b' + re.escape(struct) + r'::[A-Za-z_~]', code) if struct else False:
                    in_method = True
                elif re.match(r'^\S', code) and not code.startswith("}"):
                    in_method = False
                if dotted.search(code):
                    read = True
                elif bare.search(code) and not VISIT.search(code):
                    inside = any(s <= i <= e for s, e in own) and other.endswith(".h")
                    if (inside and not declaration.match(code)) or in_method:
                        read = True
                if read:
                    break
            if read:
                break
        if not read:
            problems.append(f"{os.path.relpath(path, root)}:{line_no + 1}: config key '{key}' (member {member} of "
                            f"{struct or '?'}) is listed but never read")
    return problems, f"{len(keys)} keys, {len(problems)} never read"


def self_test():
    """The check fails on a section with a key nothing reads, and passes once something reads it."""
    import subprocess
    import tempfile
    header = ('struct Section {\n  int used = 1;\n  int ignored = 2;\n  template <class V> void visit(V& v) {\n'
              '    v("used", used, "read below");\n    v("ignored", ignored, "read by nothing");\n  }\n};\n')
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "loop"))
        with open(os.path.join(root, "loop", "section.h"), "w") as f:
            f.write(header)
        with open(os.path.join(root, "loop", "run.cpp"), "w") as f:
            f.write("int run(const Section& s) { return s.used; }\n")
        broken = subprocess.run([sys.executable, __file__, root], capture_output=True, text=True)
        with open(os.path.join(root, "loop", "run.cpp"), "a") as f:
            f.write("int more(const Section& s) { return s.ignored; }\n")
        ok = subprocess.run([sys.executable, __file__, root], capture_output=True, text=True)
    if broken.returncode != 1 or "config key 'ignored'" not in broken.stdout or "'used'" in broken.stdout \
            or ok.returncode != 0:
        print(f"check_config_keys self-test FAILED:\n{broken.stdout}\n{ok.stdout}")
        return 1
    print("check_config_keys self-test: a key nothing reads is caught")
    return 0


if __name__ == "__main__":
    sys.exit(source_check.run("check_config_keys", check, self_test))
