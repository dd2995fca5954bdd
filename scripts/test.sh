#!/usr/bin/env bash
# Builds rlcpp and runs every test (ctest). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
scripts/ensure_python.sh >/dev/null  # .venv: Hugging Face's tokenizers (and transformers) for the parity tests
# The source tree's own rules, before the build's tests: DESIGN.md's include table and every key `rlcpp config`
# lists being read (each check first shows it can fail).
python3 scripts/check_includes.py --self-test && python3 scripts/check_includes.py
python3 scripts/check_config_keys.py --self-test && python3 scripts/check_config_keys.py
cd "${RLCPP_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
