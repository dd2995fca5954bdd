#!/usr/bin/env bash
# Builds rlcpp and runs every test (ctest). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
scripts/ensure_python.sh >/dev/null  # .venv: Hugging Face's tokenizers (and transformers) for the parity tests
cd "${RLCPP_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
