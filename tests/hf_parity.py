#!/usr/bin/env python3
"""The Hugging Face side of tests/model_hf_parity_test.cpp: `transformers` itself makes, saves and runs the models.

  make   --arch llama|qwen2 [--tie] [--bias] --seed S --sequences JSON --out DIR [--dtype float32|bfloat16]
         A tiny random LlamaForCausalLM / Qwen2ForCausalLM (GQA, a non-default rope_theta and rms_norm_eps, norm
         weights and biases random too), saved with save_pretrained(safe_serialization=True) as DIR/config.json +
         DIR/model.safetensors, and its fp32 logits for the sequences in DIR/logits.safetensors. With
         --dtype bfloat16 the checkpoint holds bf16 weights and the logits are those of the rounded weights.
  logits --dir DIR --sequences JSON --out FILE
         Opens any checkpoint directory with AutoModelForCausalLM.from_pretrained and writes its fp32 logits. A
         tensor the checkpoint lacks, has extra or shapes differently is an error: from_pretrained would otherwise
         initialise it at random and only warn.

--sequences is a JSON list of token-id lists, e.g. [[5],[1,2,3]]. Each sequence runs alone (batch 1, no padding);
the output file holds "logits" (sum of lengths, vocab_size) float32, the sequences' rows back to back (rlcpp's
packed layout), and the transformers and torch versions in its metadata.
"""
import argparse
import json
import os
import sys

try:
    import torch
    import transformers
    from safetensors.torch import save_file
except ImportError as e:  # the test prints this; the fix is the environment, not the test
    sys.exit(f"hf_parity.py: {e}: the Hugging Face environment is missing or stale; run scripts/ensure_python.sh")

transformers.logging.set_verbosity_error()  # 4.49 warns about Qwen2's (unused) sliding window on every load


def tiny_config(arch, tie, bias):
    common = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, max_position_embeddings=64, tie_word_embeddings=tie, hidden_act="silu",
                  initializer_range=0.15,  # wider than 0.02, so the logits spread over a few units
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")
    if arch == "llama":
        return transformers.LlamaConfig(rope_theta=5e5, rms_norm_eps=1e-5, attention_bias=bias, **common)
    if bias:
        sys.exit("hf_parity.py: --bias is for llama (qwen2 always has q/k/v bias and never o bias)")
    return transformers.Qwen2Config(rope_theta=1e6, rms_norm_eps=1e-6, use_sliding_window=False, **common)


def randomize_norms_and_biases(model, seed):
    """_init_weights leaves RMSNorm weights at 1 and biases at 0, where a swapped or dropped one goes unseen."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))


def logits_of(model, sequences):
    rows = []
    with torch.no_grad():
        for seq in sequences:
            rows.append(model(torch.tensor([seq], dtype=torch.long)).logits[0].float())
    return torch.cat(rows).contiguous()


def write_logits(path, logits):
    save_file({"logits": logits}, path, metadata={"transformers": transformers.__version__,
                                                   "torch": torch.__version__})


def make(args):
    torch.manual_seed(args.seed)
    cfg = tiny_config(args.arch, args.tie, args.bias)
    model_class = transformers.LlamaForCausalLM if args.arch == "llama" else transformers.Qwen2ForCausalLM
    model = model_class(cfg).eval()
    randomize_norms_and_biases(model, args.seed)
    if args.dtype == "bfloat16":
        # Round the parameters only: model.to(bfloat16) would round the RoPE frequencies (a buffer) too.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
    os.makedirs(args.out, exist_ok=True)
    write_logits(f"{args.out}/logits.safetensors", logits_of(model, args.sequences))
    model.to(getattr(torch, args.dtype)).save_pretrained(args.out, safe_serialization=True)


def logits(args):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        args.dir, torch_dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"hf_parity.py: {args.dir} does not load cleanly into {type(model).__name__}: {problems}")
    write_logits(args.out, logits_of(model.eval(), args.sequences))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--arch", choices=["llama", "qwen2"], required=True)
    m.add_argument("--tie", action="store_true", help="tie_word_embeddings (no lm_head.weight)")
    m.add_argument("--bias", action="store_true", help="llama attention_bias (q/k/v/o bias)")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    m.add_argument("--out", required=True)
    m.add_argument("--sequences", type=json.loads, required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("--dir", required=True)
    lg.add_argument("--out", required=True)
    lg.add_argument("--sequences", type=json.loads, required=True)
    args = p.parse_args()
    make(args) if args.command == "make" else logits(args)


if __name__ == "__main__":
    main()
