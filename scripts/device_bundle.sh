#!/usr/bin/env bash
# Packs what scripts/device_check.sh runs on a lent GPU machine into .device/bundle.tar.xz (git-ignored), to be
# carried there (the device tool's `carry: [".device"]`). That machine's image has the CUDA toolkit, PyTorch and
# cmake but none of rlcpp's Debian -dev packages (ZeroMQ, OpenBLAS, protobuf, MPI, ...) and no registry to fetch
# them from, so rlcpp is built HERE, for Hopper (CMakeLists.txt's default CMAKE_CUDA_ARCHITECTURES is 90: sm_90
# machine code), in build-device/ (or $RLCPP_BUILD_DIR) for any x86-64 CPU with AVX2 and FMA (-march=x86-64-v3:
# the GPU machine's host CPU is not this one, and a -march=native build could use AVX512-BF16 or AMX there and
# crash). The bundle holds the GPU test binaries, the CLI, the shared libraries they need that are neither
# glibc's nor CUDA's (CUDA's come from the machine: device_check.sh finds them), and a warm-start checkpoint of
# the default task trained here (so the GPU machine spends no device time on SFT). Refused: a build directory
# configured for another -march, an nvcc of another major version than the machine's CUDA 13.
#   scripts/device_bundle.sh                        then, on the device: scripts/device_check.sh [first|bench]
#   scripts/device_bundle.sh --from DIR --out FILE  packs DIR's binaries as they are, without building or the
#                                                   guards above, uncompressed: for the CPU dry run only
#                                                   (tests/device_check_dry_run.py); marked as unguarded
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_major=13  # the lent machines' driver and toolkit (BENCHMARKS: nvcc 13.0, torch 2.11+cu130)
# The binaries device_check.sh runs: every test with a GPU case, and the CLI.
binaries=(core_exec_context_test kernels_cuda_ops_test kernels_op_matrix_test kernels_attention_test model_cuda_test
          rollout_cuda_test trainer_cuda_test trainer_nccl_test weightsync_gpu_test rlcpp)
from="" out=.device/bundle.tar.xz
while (($#)); do
  case $1 in
    --from) from=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "device_bundle: unknown argument '$1' (expected --from DIR, --out FILE)" >&2; exit 2 ;;
  esac
done

if [ -z "$from" ]; then
  build=${RLCPP_BUILD_DIR:-build-device}
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || { echo "device_bundle: no nvcc found (the CUDA $cuda_major toolkit is needed)" >&2; exit 1; }
  nvcc_version=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
  [ "${nvcc_version%%.*}" = "$cuda_major" ] ||
    { echo "device_bundle: $nvcc is CUDA $nvcc_version; the GPU machines run CUDA $cuda_major (their driver and" \
           "runtime): build with a CUDA $cuda_major.x nvcc" >&2; exit 1; }
  if [ -f "$build/CMakeCache.txt" ]; then
    march=$(sed -n 's/^RLCPP_MARCH:[A-Z]*=//p' "$build/CMakeCache.txt")
    [ "$march" = x86-64-v3 ] ||
      { echo "device_bundle: $build is configured with RLCPP_MARCH=$march; the bundle needs x86-64-v3 (the GPU" \
             "machine's CPU is not this one): rm -rf $build, or RLCPP_BUILD_DIR=another" >&2; exit 1; }
  fi
  RLCPP_BUILD_DIR=$build RLCPP_CMAKE_ARGS="-DRLCPP_CUDA=ON -DRLCPP_MARCH=x86-64-v3" scripts/ensure_deps.sh "${binaries[@]}"
  grep -q '^CMAKE_CUDA_COMPILER:.*nvcc' "$build/CMakeCache.txt" ||
    { echo "device_bundle: $build was configured without CUDA (rm -rf $build, or RLCPP_BUILD_DIR=another)" >&2; exit 1; }
  if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
    "$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)" --list-elf "$build/core_exec_context_test" |
      grep -q sm_90 || { echo "device_bundle: no sm_90 code in $build's binaries" >&2; exit 1; }
  fi
else
  build=$from
  for b in "${binaries[@]}"; do
    [ -x "$build/$b" ] || { echo "device_bundle: --from $build has no $b (build it first)" >&2; exit 1; }
  done
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
{ git rev-parse HEAD 2>/dev/null || echo "(not a git checkout)"
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || echo "(with uncommitted changes)"; } |
  paste -sd" " >"$stage/commit"
needs=$(ldd "$build/rlcpp" | awk '/libcudart|libcublas\.|libnccl/ {print $1}' | sort -u | paste -sd" ")
if [ -n "$from" ]; then
  echo "a bundle packed from $build by --from, without the x86-64-v3 and nvcc checks (the CPU dry run's)" >"$stage/unguarded"
fi

# The warm start of the default task (configs/grpo_add3.json's warm_start.sft), trained here with the bundle's own
# CLI; RLCPP_BUNDLE_WARM_START_STEPS shortens it (the dry run: a checkpoint is all it needs).
sft_dir=$stage/sft
python3 - configs/grpo_add3.json "$sft_dir" "${RLCPP_BUNDLE_WARM_START_STEPS:-}" "$stage/sft.json" <<'EOF'
import json, sys
config, run_dir, steps, path = sys.argv[1:5]
sft = json.load(open(config))["warm_start"]["sft"]
sft["run_dir"] = run_dir
if steps:
    sft["steps"] = int(steps)
json.dump(sft, open(path, "w"), indent=1)
EOF
echo "device_bundle: the warm start ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$stage/sft.json") SFT steps of configs/grpo_add3.json's warm_start.sft)" >&2
"$build/rlcpp" sft "$stage/sft.json" >"$stage/sft.log" 2>&1 ||
  { echo "device_bundle: the warm start failed:" >&2; tail -20 "$stage/sft.log" >&2; exit 1; }
checkpoint=$(ls -d "$sft_dir"/checkpoints/step_* | sort -t_ -k2 -n | tail -1)
mkdir -p "$stage/warm_start"
for f in "$checkpoint"/*; do
  [ "$(basename "$f")" = trainer_state.safetensors ] || cp -r "$f" "$stage/warm_start/"
done
rm -rf "$sft_dir" "$stage/sft.json" "$stage/sft.log"

mkdir -p "$(dirname "$out")"
if [ -n "$from" ]; then
  tar -C "$stage" -cf "$out" .
else
  tar -C "$stage" -cJf "$out" .
fi
size=$(stat -c %s "$out")
echo "device_bundle: $out, $((size / 1024 / 1024)) MiB: ${binaries[*]}, $(ls "$stage/lib" | wc -l) libraries and the" \
  "warm start ($(basename "$checkpoint")), commit $(cat "$stage/commit")"
echo "device_bundle: the binaries need CUDA $cuda_major's runtime and libraries (${needs:-none linked}) and a driver" \
  "for CUDA >= $cuda_major.0 on the GPU machine"
[ -n "$from" ] || ((size < 48 * 1024 * 1024)) ||
  { echo "device_bundle: over 48 MiB, the device tool carries 64 MiB with the tree" >&2; exit 1; }
