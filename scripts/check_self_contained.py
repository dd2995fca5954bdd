#!/usr/bin/env python3
"""The repository stands alone: nothing in it reads or links a file outside it.

Two rules over every file git tracks (every file under the root when it is not a git checkout):
  1. no text names the planning folder that sat beside the project while it was built (the parent
     directory's shared folder, its design and benchmark pages): the repository's own pages are
     docs/architecture.md and docs/benchmarks.md, its fixtures live in tests/data/;
  2. every relative Markdown link ([text](path) or [text](path#anchor)) resolves to a file or folder inside the
     repository, and an anchor to a heading of the Markdown file it names.
Prints every offence as file:line: what, and exits 1 if any. `--self-test` first shows both rules can fail.
"""
import os
import re
import subprocess
import sys

import source_check

# Spelt in pieces so that this file does not name them itself.
FORBIDDEN = ["../" + "shared", "shared/" + "fixtures", "DESIGN" + ".md", "BENCHMARKS" + ".md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")
ANCHOR = re.compile(r'<a (?:id|name)="([^"]+)"')
BINARY_SUFFIXES = (".png", ".safetensors", ".bin", ".gz", ".xz", ".tar")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f]
    except (subprocess.CalledProcessError, FileNotFoundError):
        files = []
        for dirpath, dirnames, names in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
        return files


def github_slug(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path):
    anchors, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and line.startswith("#"):
                anchors.add(github_slug(line.lstrip("#")))
            if not fenced:
                anchors.update(ANCHOR.findall(line))
    return anchors


def check(root):
    root = os.path.realpath(root)
    bad = []
    me = os.path.realpath(__file__)
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if os.path.realpath(path) == me or rel.endswith(BINARY_SUFFIXES) or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except UnicodeDecodeError:
            continue
        fenced = False
        for number, line in enumerate(lines, 1):
            for name in FORBIDDEN:
                if name in line:
                    bad.append(f"{rel}:{number}: names '{name}', outside the repository")
            if not rel.endswith(".md"):
                continue
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.realpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if dest != root and not dest.startswith(root + os.sep):
                    bad.append(f"{rel}:{number}: link '{target}' leaves the repository")
                elif not os.path.exists(dest):
                    bad.append(f"{rel}:{number}: link '{target}': no such file")
                elif anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                    bad.append(f"{rel}:{number}: link '{target}': no heading '#{anchor}' in "
                               f"{os.path.relpath(dest, root)}")
    return bad


def self_test():
    """Each rule catches its offence, and a tree that keeps them passes."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "a.md"), "w") as f:
            f.write("# A page\n\n## Its part\n\nSee [b](../b.md#top) and [part](#its-part).\n")
        with open(os.path.join(root, "b.md"), "w") as f:
            f.write("# Top\n\n```\n[not a link](../../x.md)\n```\n")
        good = check(root)
        with open(os.path.join(root, "b.md"), "a") as f:
            f.write("[out](../elsewhere/x.md) [gone](docs/c.md) [anchor](docs/a.md#nowhere)\n")
            f.write("the tokenizer of " + FORBIDDEN[1] + "/qwen3\n")
        broken = check(root)
    want = ["leaves the repository", "no such file", "no heading '#nowhere'", "outside the repository"]
    if good or not all(any(w in b for b in broken) for w in want):
        print("check_self_contained self-test FAILED:\n" + "\n".join(good + ["--"] + broken))
        return 1
    print("check_self_contained self-test: a link out of the tree, a missing file or heading and a name outside "
          "the repository are caught")
    return 0


def findings(root):
    bad = check(root)
    return bad, (f"{len(tracked_files(os.path.realpath(root)))} files, {len(bad)} references or links outside the "
                 f"repository or broken")


if __name__ == "__main__":
    sys.exit(source_check.run("check_self_contained", findings, self_test))
