#!/usr/bin/env bash
# The repository stands alone (CI, after scripts/test.sh has built everything): first the source check
# (scripts/check_self_contained.py: nothing names or links a file outside the repository), then every test that
# reads a fixture of tests/data/ (each test file that includes tests/test_fixtures.h), from the build here but
# reading its files from a fresh `git clone` of this commit in an empty temporary directory: nothing beside the
# clone, and only what is committed in it. Exits non-zero on any failure.
# Why not the whole suite in the clone: a second build and ctest run would cost about half an hour of CI's 90
# minutes; the source check covers every other file, and the tests that read fixtures by path are the ones a
# missing file breaks.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/check_self_contained.py --self-test
python3 scripts/check_self_contained.py
build="${RLCPP_BUILD_DIR:-build}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git clone --quiet --no-local . "$tmp/rlcpp"
echo "check_self_contained: a clone of $(git rev-parse --short HEAD) alone in $tmp" >&2
status=0
for src in $(grep -l '"tests/test_fixtures.h"' tests/*_test.cpp); do
  test="$(basename "$src" .cpp)"
  echo "check_self_contained: $test against the clone" >&2
  RLCPP_SOURCE_DIR="$tmp/rlcpp" RLCPP_VENV="${RLCPP_VENV:-$PWD/.venv}" OMP_WAIT_POLICY=PASSIVE \
    "$build/$test" --gtest_brief=1 || status=1
done
exit $status
