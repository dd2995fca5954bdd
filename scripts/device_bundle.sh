#!/usr/bin/env bash
# Packs what scripts/device_check.sh runs on a lent GPU machine into .device/bundle.tar.xz (git-ignored), to be
# carried there (the device tool's `carry: [".device"]`). That machine's image has the CUDA toolkit, PyTorch and
# cmake but none of rlcpp's Debian -dev packages (ZeroMQ, OpenBLAS, protobuf, MPI, ...) and no registry to fetch
# them from, so rlcpp is built HERE, for Hopper (CMakeLists.txt's default CMAKE_CUDA_ARCHITECTURES is 90:
# sm_90 machine code), in build-device/ (or $RLCPP_BUILD_DIR) for any x86-64 CPU with AVX2 and FMA (-march=x86-64-v3:
# the GPU machine's host CPU is not this one), and the bundle holds the GPU test binaries, the CLI and the shared
# libraries they need that are neither glibc's nor CUDA's (CUDA's come from the machine: device_check.sh finds them).
#   scripts/device_bundle.sh            then, on the device: scripts/device_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${RLCPP_BUILD_DIR:-build-device}
# The binaries device_check.sh runs: every test with a GPU case, and the CLI.
binaries=(core_exec_context_test kernels_ops_test kernels_cuda_ops_test kernels_attention_test model_cuda_test
          rollout_cuda_test trainer_cuda_test trainer_nccl_test weightsync_gpu_test rlcpp)

RLCPP_BUILD_DIR=$build RLCPP_CMAKE_ARGS="-DRLCPP_CUDA=ON -DRLCPP_MARCH=x86-64-v3" scripts/ensure_deps.sh "${binaries[@]}"
grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$build/CMakeCache.txt" ||
  { echo "device_bundle: $build was configured without CUDA (rm -rf $build, or RLCPP_BUILD_DIR=another)" >&2; exit 1; }
if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
  "$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)" --list-elf "$build/core_exec_context_test" |
    grep -q sm_90 || { echo "device_bundle: no sm_90 code in $build's binaries" >&2; exit 1; }
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in "${binaries[@]}"; do cp "$build/$b" "$stage/bin/"; done
# Shared libraries: all but glibc's, the compiler runtime's (the machine's are as new or newer) and CUDA's.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.'
for b in "${binaries[@]}"; do ldd "$build/$b"; done | awk '/=>/ && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ $name =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
  done
{ git rev-parse HEAD; [ -z "$(git status --porcelain --untracked-files=no)" ] || echo "(with uncommitted changes)"; } | paste -sd" " >"$stage/commit"
mkdir -p .device
tar -C "$stage" -cJf .device/bundle.tar.xz .
size=$(stat -c %s .device/bundle.tar.xz)
echo "device_bundle: .device/bundle.tar.xz, $((size / 1024 / 1024)) MiB: ${binaries[*]} and $(ls "$stage/lib" | wc -l) libraries, commit $(cat "$stage/commit")"
((size < 48 * 1024 * 1024)) || { echo "device_bundle: over 48 MiB, the device tool carries 64 MiB with the tree" >&2; exit 1; }
