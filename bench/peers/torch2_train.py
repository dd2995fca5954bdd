#!/usr/bin/env python3
"""PyTorch 2 training peer (issue 16): one fwd+bwd+AdamW step of Hugging Face transformers' own
LlamaForCausalLM / Qwen2ForCausalLM on the CPU, eager and under torch.compile (inductor), the way a PyTorch
user trains. Run it with the peers' environment (scripts/install_peers.sh):

  build/peers/venv/bin/python bench/peers/torch2_train.py train --preset tiny|qwen05b | --checkpoint DIR
      [--batch 512 --seq 18 --iters 5 --warmup 2 --threads 1|2|best --modes eager,compile --seed 0]
      [--device cpu|cuda|cuda:N --dtype fp32|bf16]

On a GPU (`--device cuda`, the machine's own PyTorch: issue 19's training peer) the model, the tokens and the
fused AdamW live there, each step is timed to a torch.cuda.synchronize(), and `--dtype bf16` runs the forward
and the loss under torch.autocast(bfloat16) over fp32 master weights, the way a PyTorch user trains in bf16.

Tokens are random ids (seeded); the loss is the token-mean cross-entropy of next-token prediction over every
position (what rlcpp's `bench train` computes: one log-prob per token, its mean); AdamW lr 1e-4, betas (0.9,
0.95), eps 1e-8, no weight decay, fused (the fastest CPU AdamW of torch 2). fp32 throughout on the CPU.

Prints ONE JSON object on stdout (human text on stderr): {"peer": "pytorch2", "torch", "transformers",
"command": "train", "model", "parameters", "batch", "seq", "threads", "threads_option", "modes": {"eager":
{"ms", "tokens_per_s"}, "compile": {"ms", "tokens_per_s", "compile_s"}}, "ms" (the faster mode's), "best_mode",
"flops_per_token" (6N)}; a mode that fails has {"error": "..."} instead. `--threads best` runs once per thread
count (1, 2) in child processes and keeps, per mode, the faster.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# Before torch loads: idle OpenMP threads must sleep, not spin (docs/benchmarks.md "Peers").
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PRESETS = {
    # ../../model/model_config.cpp model_preset: W1 and W2 of docs/benchmarks.md
    "tiny": dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=32, hidden_size=128,
                 num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, intermediate_size=352,
                 rms_norm_eps=1e-5, rope_theta=1e4, tie_word_embeddings=True, max_position_embeddings=64,
                 head_dim=32),
    "qwen05b": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=151936, hidden_size=896,
                    num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
                    rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True, max_position_embeddings=32768),
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def build_model(args):
    import torch
    import transformers
    if args.checkpoint:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32)
    else:
        spec = dict(PRESETS[args.preset])
        arch = spec.pop("architectures")[0]
        config = transformers.AutoConfig.for_model(**spec)
        torch.manual_seed(args.seed)
        model = getattr(transformers, arch)(config).to(torch.float32)
    model.config.use_cache = False
    return model


def time_mode(model_factory, mode, args):
    """Median ms of one fwd+bwd+AdamW step (and the first steps' time under compile)."""
    import torch
    import torch.nn.functional as F
    import contextlib
    device = torch.device(args.device)
    model = model_factory().to(device)
    model.train()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, vocab, (args.batch, args.seq), generator=g).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0,
                                  fused=True)
    forward = torch.compile(model) if mode == "compile" else model
    autocast = (torch.autocast(device_type=device.type, dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())

    def step():
        with autocast:
            logits = forward(input_ids=tokens).logits
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return loss

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    warm_s = time.perf_counter() - start
    times = []
    for _ in range(args.iters):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    ms = 1e3 * statistics.median(times)
    out = {"ms": ms, "tokens_per_s": args.batch * args.seq / (ms / 1e3)}
    if mode == "compile":
        out["compile_s"] = warm_s  # the warm-up steps, which include compiling forward and backward
    return out


def train(args):
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    model = build_model(args)
    n = sum(p.numel() for p in model.parameters())  # tied embeddings counted once, as rlcpp counts them
    shape = args.checkpoint or args.preset
    log(f"torch2_train: {shape}, {n} parameters, {args.batch} x {args.seq} tokens, {args.threads} threads, "
        f"{args.device}, {args.dtype}")
    device = torch.device(args.device)
    result = {"peer": "pytorch2", "torch": torch.__version__, "transformers": transformers.__version__,
              "command": "train", "model": shape, "parameters": n, "batch": args.batch, "seq": args.seq,
              "threads": args.threads, "threads_option": str(args.threads), "flops_per_token": 6 * n,
              "dtype": args.dtype, "autocast": args.dtype == "bf16",
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", "modes": {}}
    for mode in args.modes.split(","):
        try:
            result["modes"][mode] = time_mode(lambda: build_model(args), mode, args)
            log(f"  {mode}: {result['modes'][mode]['ms']:.1f} ms")
        except Exception as e:  # a mode that cannot run here is reported, not substituted
            result["modes"][mode] = {"error": f"{type(e).__name__}: {e}".splitlines()[0][:500]}
            log(f"  {mode}: failed: {result['modes'][mode]['error']}")
    return finish(result)


def finish(result):
    ok = {m: r for m, r in result["modes"].items() if "ms" in r}
    if ok:
        result["best_mode"] = min(ok, key=lambda m: ok[m]["ms"])
        result["ms"] = ok[result["best_mode"]]["ms"]
    return result


def best_of_threads(argv):
    """Each thread count in a child process (torch's thread pool is fixed once used); per mode the faster."""
    runs = []
    for threads in (1, 2):
        cmd = [sys.executable, os.path.abspath(__file__)] + argv + ["--threads", str(threads)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"torch2_train: the {threads}-thread run failed (exit {proc.returncode})")
        runs.append(json.loads(lines[-1]))
    result = dict(runs[0])
    result["threads_option"] = "best"
    result["modes"] = {}
    result["candidates"] = [{"threads": r["threads"], "modes": r["modes"]} for r in runs]
    for mode in runs[0]["modes"]:
        timed = [(r["modes"][mode]["ms"], r["threads"], r["modes"][mode]) for r in runs if "ms" in r["modes"][mode]]
        if timed:
            ms, threads, figures = min(timed, key=lambda t: t[0])
            result["modes"][mode] = dict(figures, threads=threads)
        else:
            result["modes"][mode] = runs[0]["modes"][mode]
    result.pop("threads", None)
    return finish(result)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["train"])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    src.add_argument("--checkpoint", help="a Hugging Face directory (an rlcpp checkpoint)")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seq", type=int, default=18)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", default="best")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="bf16: torch.autocast(bfloat16)")
    args = p.parse_args()
    if args.threads == "best":
        argv = list(sys.argv[1:])
        if "--threads" in argv:
            i = argv.index("--threads")
            del argv[i:i + 2]
        result = best_of_threads(argv)
    else:
        args.threads = int(args.threads)
        result = train(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
