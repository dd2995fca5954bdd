#!/usr/bin/python3
"""PyTorch CPU peer of docs/benchmarks.md ("Peers", CPU): the same Llama model as rlcpp's golden
reference (tests/golden/llama_model.py), W1 shapes, random weights from a seed, eager PyTorch.

  torch_peer.py train     [--batch 512 --seq 18 --iters 3 --warmup 1]
  torch_peer.py decode    [--batch 512 --context 16 --iters 20 --warmup 3]
  torch_peer.py rollout   [--prompts 64 --group 8 --prompt-len 10 --new-tokens 8 --iters 3 --warmup 1]
  torch_peer.py grpo-step [--prompts 64 --group 8 --prompt-len 10 --new-tokens 6 --minibatches 2 --iters 2 --warmup 1]
  every command above: [--threads 1|2|best] [--seed 0]
  torch_peer.py grpo-run --checkpoint DIR [--steps 200 --eval-every 20 --eval-size 1000 --out CURVE.jsonl
                         --lr 1e-4 --prompts 64 --group 8 --minibatches 2 --new-tokens 6 --threads 2 --seed 1]

Each prints ONE JSON object on stdout (human text goes to stderr). Every object has "peer", "torch",
"command", "model" ("W1"), "threads", "threads_option" and "ms", the command's headline time (a median over
--iters timed repetitions after --warmup untimed ones); the other keys are listed in each command's function.
`--threads best` runs the command once per thread count in child processes and prints the object of the one
with the lower "ms", with "threads_option": "best" and "candidates": [{"threads": n, "ms": ...}, ...].

grpo-run is GRPO on add3 from an rlcpp checkpoint (config.json + model.safetensors) with rlcpp's recipe,
training problems and held-out set, evaluated every --eval-every steps; it writes the curve (one JSON object
per evaluation: step, train_wall_s without eval time, accuracy, mean_reward, eval_mean_reward, eval_s) to
--out and prints the usual object with "curve". It is one long run, so it takes --threads 1 or 2 (default 2),
not best. See torch_peer_grpo_run.py.
"""

import argparse
import json
import os
import subprocess
import sys

# Before torch loads: idle OpenMP threads must sleep, not spin against OpenBLAS's (2.8x slower otherwise).
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_coretype():
    """OpenBLAS 0.3.21 (Debian 12) does not recognise these VMs' CPU model ("Intel(R) Xeon(R) Processor")
    and falls back to its Prescott (SSE3) kernels, about 3x slower at sgemm than its AVX-512 ones. Name the
    kernels from the CPU's flags unless the caller chose. OpenBLAS reads this only when it loads."""
    if "OPENBLAS_CORETYPE" not in os.environ:
        flags = cpu_flags()
        coretype = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
        if coretype:
            os.environ["OPENBLAS_CORETYPE"] = coretype
    return os.environ.get("OPENBLAS_CORETYPE", "auto")

W1 = dict(model_type="llama", vocab_size=32, hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
          num_key_value_heads=2, intermediate_size=352, rms_norm_eps=1e-5, rope_theta=1e4,
          tie_word_embeddings=True, max_position_embeddings=64)
THREAD_CHOICES = ("1", "2")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, **defaults):
        c = sub.add_parser(name)
        c.add_argument("--threads", default="best", choices=THREAD_CHOICES + ("best",))
        c.add_argument("--seed", type=int, default=0)
        for key, value in defaults.items():
            c.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
        return c

    command("train", batch=512, seq=18, iters=3, warmup=1, lr=1e-3)
    command("decode", batch=512, context=16, iters=20, warmup=3)
    command("rollout", prompts=64, group=8, prompt_len=10, new_tokens=8, iters=3, warmup=1, temperature=1.0)
    command("grpo-step", prompts=64, group=8, prompt_len=10, new_tokens=6, minibatches=2, iters=2, warmup=1,
            temperature=1.0, lr=1e-4, clip=0.2, max_grad_norm=1.0)
    run = command("grpo-run", steps=200, prompts=64, group=8, new_tokens=6, minibatches=2, temperature=1.0,
                  lr=1e-4, clip=0.2, max_grad_norm=1.0, eval_every=20, eval_size=1000, log_every=10, out="")
    run.add_argument("--checkpoint", required=True, help="rlcpp checkpoint directory (config.json + model.safetensors)")
    run.set_defaults(threads="2", seed=1)  # seed 1: the training problems of rlcpp's default run seed
    args = p.parse_args(argv)
    if args.command == "grpo-run":
        if args.threads == "best":
            p.error("grpo-run is one long run: give --threads 1 or 2")
        for key in ("steps", "eval_every", "eval_size", "log_every"):
            if getattr(args, key) < 1:
                p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
        if args.temperature <= 0:
            p.error(f"--temperature {args.temperature}, expected > 0 (GRPO samples)")
    for key in ("batch", "seq", "context", "prompts", "group", "prompt_len", "new_tokens", "iters", "minibatches"):
        if getattr(args, key, 1) < 1:
            p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
    if getattr(args, "seq", 2) < 2:
        p.error("--seq must be >= 2 (a token predicts the next)")
    if args.command == "train":
        length = args.seq
    elif args.command == "decode":
        length = args.context + 1
    elif args.command == "grpo-run":
        length = 1 + len("999+999=") + args.new_tokens  # BOS + the longest add3 prompt
    else:
        length = args.prompt_len + args.new_tokens
    if length > W1["max_position_embeddings"]:
        p.error(f"sequences of {length} tokens exceed W1's context {W1['max_position_embeddings']}")
    if args.command in ("grpo-step", "grpo-run") and args.prompts % args.minibatches:
        p.error(f"--prompts {args.prompts} is not divisible into {args.minibatches} mini-batches of whole groups")
    return args


def run_best(argv):
    """Runs this command with 1 and 2 threads in fresh processes (thread pools are fixed at start) and
    returns the faster run's object."""
    runs = []
    for n in THREAD_CHOICES:
        child, skip = [], False
        for a in argv:  # drop "--threads X" and "--threads=X"
            if not skip and not a.startswith("--threads"):
                child.append(a)
            skip = a == "--threads"
        child += ["--threads", n]
        out = subprocess.run([sys.executable, os.path.abspath(__file__)] + child, stdout=subprocess.PIPE,
                             check=True, text=True)
        runs.append(json.loads(out.stdout))
    best = min(runs, key=lambda r: r["ms"])
    best["threads_option"] = "best"
    best["candidates"] = [{"threads": r["threads"], "ms": r["ms"]} for r in runs]
    return best


def main(argv):
    args = parse_args(argv)
    coretype = openblas_coretype()
    if args.threads == "best":
        result = run_best(argv)
    else:
        threads = int(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
        if args.command == "grpo-run":
            import torch_peer_grpo_run  # imports torch, so only now that the environment is set

            result = torch_peer_grpo_run.run(args, threads)
        else:
            import torch_peer_work  # imports torch, so only now that the environment is set

            result = torch_peer_work.run(args, W1, threads)
        result["openblas_coretype"] = coretype
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
