"""The command line every source check of scripts/test.sh shares (check_includes, check_device_neutral,
check_config_keys, check_self_contained): `--self-test`, which shows the check can fail, or the tree to check, the
repository by default.
"""
import os
import sys

REPOSITORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(name, check, self_test):
    """check(root) returns (findings, summary): each finding is printed (file:line: what), then `name: summary`;
    the exit status is 1 if there is any finding. Returns the exit status of the check or of self_test()."""
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    findings, summary = check(sys.argv[1] if len(sys.argv) > 1 else REPOSITORY)
    for line in findings:
        print(line)
    print(f"{name}: {summary}")
    return 1 if findings else 0
