#!/usr/bin/env python3
"""`rlcpp serve` under load (issue 35): starts the server, streams /v1/completions from 1, 16, 64, ... concurrent
clients and reports throughput, time to first token (TTFT) and time per output token (TPOT); with --shared-prefix
N, the TTFT of requests sharing an N-token system prompt with the prefix cache on and off. Python's standard library
only (threads + http.client); prompts are token ids, so any model works.

  python3 bench/serve_bench.py --model bench/serve_model.json --clients 1,16,64
  python3 bench/serve_bench.py --model bench/serve_model.json --shared-prefix 512
"""
import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import threading
import time


def start_server(args, prefix_cache):
    model = ["--preset", args.model] if not args.checkpoint else [args.checkpoint]
    cmd = [args.rlcpp, "serve", *model, "--port", "0", "--max-context", str(args.max_context),
           "--max-concurrency", "256", "--max-num-seqs", str(args.max_num_seqs),
           "--prefix-cache", "true" if prefix_cache else "false", *args.server_arg]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    m = re.search(r"on http://[^:]+:(\d+),", line)
    if not m:
        proc.kill()
        sys.exit(f"serve did not start: {line}{proc.stdout.read()}")
    return proc, int(m.group(1)), line.strip()


def stream(port, prompt, max_tokens, seed):
    """One streamed completion: (ttft_s, total_s, tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "seed": seed, "ignore_eos": True,
                       "temperature": 1.0, "stream": True, "return_token_ids": True})
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"HTTP {res.status}: {res.read()[:300]}")
    ttft, tokens = None, 0
    for raw in res:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        n = sum(len(c.get("token_ids", [])) for c in json.loads(line[6:])["choices"])
        if n and ttft is None:
            ttft = time.perf_counter() - t0
        tokens += n
    conn.close()
    return ttft, time.perf_counter() - t0, tokens


def load(port, clients, requests_each, prompt_len, max_tokens, vocab):
    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        for r in range(requests_each):
            prompt = [rng.randrange(vocab) for _ in range(prompt_len)]
            try:
                out = stream(port, prompt, max_tokens, seed=1000 * i + r)
                with lock:
                    results.append(out)
            except Exception as e:  # recorded, the row says so
                with lock:
                    errors.append(str(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[2] for r in results)
    ttft = [r[0] for r in results if r[0] is not None]
    tpot = [(r[1] - r[0]) / (r[2] - 1) for r in results if r[0] is not None and r[2] > 1]
    return {"clients": clients, "requests": len(results), "errors": len(errors), "wall_s": wall,
            "tokens_per_s": tokens / wall, "ttft_median_s": statistics.median(ttft) if ttft else None,
            "ttft_p90_s": sorted(ttft)[max(0, -(-9 * len(ttft) // 10) - 1)] if ttft else None,
            "tpot_median_s": statistics.median(tpot) if tpot else None, "first_error": errors[0] if errors else ""}


def shared_prefix_ttft(port, prefix_len, suffix_len, requests, vocab):
    rng = random.Random(7)
    system = [rng.randrange(vocab) for _ in range(prefix_len)]
    ttfts = []
    for r in range(requests + 1):  # the first computes the prefix; it is not counted
        prompt = system + [rng.randrange(vocab) for _ in range(suffix_len)]
        ttft, _, _ = stream(port, prompt, 4, seed=r)
        if r > 0:
            ttfts.append(ttft)
    return statistics.median(ttfts)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlcpp", default="build/rlcpp")
    p.add_argument("--model", default="bench/serve_model.json", help="a preset or a config.json (random weights)")
    p.add_argument("--checkpoint", default="", help="a checkpoint directory instead of --model")
    p.add_argument("--vocab", type=int, default=0, help="prompt ids below this (default: from --model's json)")
    p.add_argument("--clients", default="1,16,64")
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--max-context", type=int, default=1024)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--shared-prefix", type=int, default=0, help="TTFT with vs without the prefix cache instead")
    p.add_argument("--suffix-len", type=int, default=16)
    p.add_argument("--ttft-requests", type=int, default=8)
    p.add_argument("--server-arg", action="append", default=[], help="passed to rlcpp serve (repeat)")
    args = p.parse_args()
    vocab = args.vocab or (json.load(open(args.model))["vocab_size"] if args.model.endswith(".json") else 32)

    if args.shared_prefix:
        ttft = {}
        for cache in (False, True):
            proc, port, banner = start_server(args, cache)
            try:
                ttft[cache] = shared_prefix_ttft(port, args.shared_prefix, args.suffix_len, args.ttft_requests, vocab)
            finally:
                proc.terminate()
                proc.wait()
            print(f"# {banner}")
        print("| shared prefix | suffix | TTFT, cache off | TTFT, cache on | speed-up |\n"
              "| ---: | ---: | ---: | ---: | ---: |")
        print(f"| {args.shared_prefix} | {args.suffix_len} | {1e3 * ttft[False]:.1f} ms | {1e3 * ttft[True]:.1f} ms | "
              f"{ttft[False] / ttft[True]:.1f}x |")
        return
    proc, port, banner = start_server(args, True)
    print(f"# {banner}")
    print("| clients | requests | tokens/s | TTFT median | TTFT p90 | TPOT median | errors |\n"
          "| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    try:
        for c in [int(x) for x in args.clients.split(",")]:
            r = load(port, c, args.requests_per_client, args.prompt_len, args.max_tokens, vocab)
            ms = lambda x: "—" if x is None else f"{1e3 * x:.1f} ms"
            print(f"| {c} | {r['requests']} | {r['tokens_per_s']:.0f} | {ms(r['ttft_median_s'])} | "
                  f"{ms(r['ttft_p90_s'])} | {ms(r['tpot_median_s'])} | {r['errors']} {r['first_error'][:80]} |",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
