#!/usr/bin/env bash
# Installs the Debian packages rlcpp needs when any is missing (needs root or sudo), then configures and builds
# into build/ (or $RLCPP_BUILD_DIR): the targets given as arguments, or everything; `--packages-only [PACKAGE ...]`
# installs those packages too and stops there. Quiet when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config libopenblas-openmp-dev libzmq3-dev cppzmq-dev nlohmann-json3-dev
          libgtest-dev libcli11-dev librandom123-dev libxxhash-dev libbenchmark-dev libpcre2-dev libutf8proc-dev
          libcpp-httplib-dev libprotobuf-dev protobuf-compiler libopenmpi-dev openmpi-bin
          python3-torch python3-numpy python3-zmq python3-matplotlib python3-venv)
packages_only=0
if [ "${1:-}" = --packages-only ]; then
  packages_only=1
  shift
  packages+=("$@")
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "rlcpp: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

((packages_only)) && exit 0
build_dir=${RLCPP_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${RLCPP_CMAKE_ARGS:-} >&2
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" >&2
