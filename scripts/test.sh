#!/usr/bin/env bash
# Builds rlcpp and runs every test (ctest). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure_deps.sh
cd "${RLCPP_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
