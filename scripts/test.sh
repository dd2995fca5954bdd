#!/usr/bin/env bash
# Builds rlcpp and runs every test (ctest). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
scripts/ensure_python.sh >/dev/null  # .venv: Hugging Face's tokenizers (and transformers) for the parity tests
# The source tree's own rules, before the build's tests: docs/architecture.md's include table and its device rule
# (no branch on the device in the algorithm, loop and channel folders), every key `rlcpp config` lists being read, and nothing named or linked
# outside the repository (each check first shows it can fail).
python3 scripts/check_includes.py --self-test && python3 scripts/check_includes.py
python3 scripts/check_device_neutral.py --self-test && python3 scripts/check_device_neutral.py
python3 scripts/check_config_keys.py --self-test && python3 scripts/check_config_keys.py
python3 scripts/check_self_contained.py --self-test && python3 scripts/check_self_contained.py
cd "${RLCPP_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
