#!/usr/bin/env python3
"""Hugging Face rollout peer on a GPU (issue 19): `LlamaForCausalLM.generate` (transformers) sampling from an rlcpp
checkpoint (a Hugging Face directory) on CUDA, the rollout most RL frameworks fall back on (TRL's default), in two
modes: eager (the dynamic cache) and a static cache, which transformers compiles with torch.compile and replays as
CUDA graphs. Run with a Python that has torch and transformers (the lent GPU machine's own):

  python3 bench/peers/hf_generate.py rollout --checkpoint DIR
      [--prompts 64 --group 8 --prompt-len 10 --new-tokens 8 --dtype float32|bfloat16 --iters 3 --warmup 1
       --modes eager,static --seed 0]

Prompts are --prompts lists of --prompt-len random token ids (seeded, ids >= 3), each repeated --group times
(num_return_sequences), sampled at temperature 1 with no top-k/top-p, exactly --new-tokens tokens (EOS
ignored: min_new_tokens = max_new_tokens), as rlcpp's `bench rollout` times it. Each timed iteration is one
`generate` call of the whole batch, synchronised. A mode that fails reports {"error"} and the others still run.

Prints ONE JSON object on stdout (human text on stderr): {"peer": "hf", "torch", "transformers", "device",
"command": "rollout", "dtype", "prompts", "group", "prompt_len", "new_tokens", "sequences", "ms",
"tokens_per_s" (the best mode's), "modes": {"eager": {"ms", "tokens_per_s"} | {"error"}, "static": ...}}.
"""

import argparse
import json
import random
import sys

from peer_timing import median_ms


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def rollout(args):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    device = torch.device(args.device)
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, torch_dtype=dtype).to(device).eval()
    vocab = model.config.vocab_size
    rng = random.Random(args.seed)
    prompts = torch.tensor([[rng.randrange(3, vocab) for _ in range(args.prompt_len)] for _ in range(args.prompts)],
                           device=device)
    attention = torch.ones_like(prompts)
    sequences = args.prompts * args.group

    def run_mode(mode):
        kwargs = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=args.new_tokens,
                      min_new_tokens=args.new_tokens, num_return_sequences=args.group, pad_token_id=0)
        if mode == "static":
            kwargs["cache_implementation"] = "static"

        def once():
            with torch.inference_mode():
                out = model.generate(input_ids=prompts, attention_mask=attention, **kwargs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return int(out.shape[0]) * (int(out.shape[1]) - args.prompt_len)

        ms, generated = median_ms(once, args.warmup, args.iters)
        log(f"hf_generate ({mode}): {sequences} sequences x {args.new_tokens} new tokens: {ms:.1f} ms")
        return {"ms": ms, "tokens_per_s": sequences * args.new_tokens / (ms / 1e3), "generated_tokens": generated}

    modes = {}
    for mode in args.modes.split(","):
        try:
            modes[mode] = run_mode(mode)
        except Exception as e:  # a mode that does not run here is reported, not substituted
            modes[mode] = {"error": f"{type(e).__name__}: {e}"[:300]}
            log(f"hf_generate ({mode}) failed: {modes[mode]['error']}")
    measured = [m for m in modes.values() if "tokens_per_s" in m]
    best = max(measured, key=lambda m: m["tokens_per_s"]) if measured else {}
    return {"peer": "hf", "torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device), "command": "rollout", "dtype": args.dtype,
            "prompts": args.prompts, "group": args.group, "prompt_len": args.prompt_len,
            "new_tokens": args.new_tokens, "sequences": sequences, "ms": best.get("ms"),
            "tokens_per_s": best.get("tokens_per_s"), "modes": modes}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["rollout"])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=10)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--modes", default="eager,static")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="accepted for the benches' common options; unused")
    args = p.parse_args()
    print(json.dumps(rollout(args)))


if __name__ == "__main__":
    main()
