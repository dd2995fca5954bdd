#!/usr/bin/env bash
# Configures and builds an instrumented tree with clang, then prints its directory on stdout:
#   scripts/instrumented_build.sh address [TARGET ...]  build-asan/: ASan + UBSan, with libFuzzer's coverage, so the
#                                                        tests (scripts/sanitize.sh) and the fuzz targets
#                                                        (scripts/fuzz.sh) come from one build
#   scripts/instrumented_build.sh thread [TARGET ...]   build-tsan/: TSan
# The given targets, or everything. Installs what is missing first: the Debian packages of scripts/ensure_deps.sh,
# and clang with its sanitizer runtimes and OpenMP. Clang compiles instrumented code in half GCC's time (2 cores:
# loop/controller.cpp under ASan at -O1, 22 s against 46 s), which is what lets CI run both modes and the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case "$mode" in
  address) build_dir=build-asan flags=(-DRLCPP_SANITIZE=address,undefined -DRLCPP_FUZZ=ON) ;;
  thread) build_dir=build-tsan flags=(-DRLCPP_SANITIZE=thread) ;;
  *) echo "scripts/instrumented_build.sh: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
esac

scripts/ensure_deps.sh --packages-only clang libclang-rt-14-dev libomp-14-dev

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DRLCPP_CUDA=OFF "${flags[@]}" >&2
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" >&2
echo "$build_dir"
