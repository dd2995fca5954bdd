#!/usr/bin/env python3
"""llama.cpp's OpenAI server (`llama_cpp.server` from llama-cpp-python) as `bench/serve_bench.py`'s peer, on the
checkpoint `rlcpp serve` loads (build/peers/venv, scripts/install_peers.sh).

  llamacpp_server.py checkpoint --shape w1|w2 --out DIR
      random weights of the shape as a Hugging Face checkpoint (transformers, float32): W1 is rlcpp's "tiny"
      (Llama, 0.75M parameters, the character tokenizer), W2 its "qwen05b" (Qwen2-0.5B's shapes, the Qwen3
      tokenizer's vocabulary); both servers load it
  llamacpp_server.py serve --checkpoint DIR --tokenizer char|TOKENIZER_JSON --port P [--kv f32|f16] [--threads 2]
      converts it to GGUF with that tokenizer (llamacpp_rollout.py convert: the same text tokenizes to the same ids
      as in rlcpp) and runs `python -m llama_cpp.server` on 127.0.0.1:P until killed
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llamacpp_rollout  # noqa: E402

SHAPES = {
    "w1": dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=32, hidden_size=128,
               num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=352,
               max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=1e4, tie_word_embeddings=True,
               bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "w2": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], vocab_size=151936, hidden_size=896,
               num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
               max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True,
               bos_token_id=151643, eos_token_id=151645, pad_token_id=151643),
}


def cmd_checkpoint(args):
    import torch
    import transformers
    torch.manual_seed(1)
    cfg = dict(SHAPES[args.shape])
    config = transformers.AutoConfig.for_model(**cfg)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.save_pretrained(args.out, safe_serialization=True)
    print(args.out)


def cmd_serve(args):
    path, seconds, cached = llamacpp_rollout.convert(args.checkpoint, "f32", tokenizer=args.tokenizer)
    print(f"llamacpp_server: {path} ({'cached' if cached else f'converted in {seconds:.1f} s'})", file=sys.stderr,
          flush=True)
    kv = {"f32": 0, "f16": 1}[args.kv]
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.execv(sys.executable, [sys.executable, "-m", "llama_cpp.server", "--model", path, "--host", "127.0.0.1",
                              "--port", str(args.port), "--n_ctx", str(args.n_ctx), "--n_batch", "512",
                              "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads),
                              "--type_k", str(kv), "--type_v", str(kv), "--verbose", "False"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("checkpoint")
    c.add_argument("--shape", choices=sorted(SHAPES), required=True)
    c.add_argument("--out", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--tokenizer", required=True, help="char, or a tokenizer.json")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--kv", choices=["f32", "f16"], default="f32")
    s.add_argument("--threads", type=int, default=os.cpu_count())
    s.add_argument("--n-ctx", type=int, default=4096)
    args = p.parse_args()
    {"checkpoint": cmd_checkpoint, "serve": cmd_serve}[args.command](args)


if __name__ == "__main__":
    main()
