#!/usr/bin/env bash
# The Python environment of the tests that compare with Hugging Face's libraries: .venv/ (or $RLCPP_VENV), a
# virtual environment over Debian's python3 that sees its packages (python3-torch, numpy) and adds, from PyPI,
# the pinned versions below. Quiet when they are all there; prints the environment's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${RLCPP_VENV:-$PWD/.venv}
# transformers 4.49.0 is the newest that runs on Debian's torch 1.13 (4.50 on import torch.distributed.tensor,
# which torch 1.13 lacks); it needs tokenizers 0.21.x and huggingface_hub < 1.0, so those are pinned to match;
# jinja2 renders chat templates (apply_chat_template); tensorboard's own reader loads the event files rlcpp writes;
# openai is the client `rlcpp serve`'s test drives (pure Python: httpx and pydantic, no torch).
requirements=(transformers==4.49.0 tokenizers==0.21.4 huggingface_hub==0.36.2 safetensors==0.8.0 jinja2==3.1.6
              tensorboard==2.19.0 openai==1.109.1 psutil==5.9.8)
# peft opens rlcpp's LoRA adapters and writes its own for rlcpp to open; it and accelerate (which it imports) go in
# without their dependencies: both declare torch >= 1.13.0, which Debian's 1.13.0a0 does not satisfy, so pip would
# fetch a CUDA build of torch (gigabytes) into the environment. What else they need is above (psutil) or comes with
# transformers (pyyaml, tqdm, packaging, numpy). 0.14.0 and 0.34.2 still support torch 1.13.
without_dependencies=(peft==0.14.0 accelerate==0.34.2)
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
fi
missing() {
  local r have
  for r in "$@"; do
    have=$("$venv/bin/python" -m pip show "${r%%==*}" 2>/dev/null | sed -n 's/^Version: //p' || true)
    [ "$have" = "${r##*==}" ] || return 0
  done
  return 1
}
if missing "${requirements[@]}"; then
  echo "rlcpp: installing ${requirements[*]} into $venv (PyPI)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${requirements[@]}" >&2
fi
if missing "${without_dependencies[@]}"; then
  echo "rlcpp: installing ${without_dependencies[*]} into $venv (PyPI, without their dependencies)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${without_dependencies[@]}" >&2
fi
echo "$venv/bin/python"
