#!/usr/bin/python3
"""llama.cpp peer of docs/benchmarks.md ("Peers", CPU): batched sampling on the SAME weights as rlcpp,
through llama.cpp's own C API (llama-cpp-python's low-level ctypes bindings), so rlcpp can report
rlcpp / llama.cpp tokens/s ratios.

  llamacpp_rollout.py convert --checkpoint DIR [--dtype f32|bf16|f16] [--cache-dir D] [--force]
  llamacpp_rollout.py check   --checkpoint DIR [--dtype f32] [--prompt-len 16] [--threads 2 --seed 0]
  llamacpp_rollout.py rollout --checkpoint DIR [--prompts 64 --group 8 --prompt-len 10 --new-tokens 8]
                              [--dtype f32|bf16|f16] [--iters 3 --warmup 1 --threads 2 --seed 0]
                              [--sampler llama|numpy] [--kv-type auto|f32|f16|bf16] [--flash-attn auto|on|off]

DIR is an rlcpp / Hugging Face checkpoint (config.json with architectures LlamaForCausalLM or
Qwen2ForCausalLM, model.safetensors in float32). It is converted once per (checkpoint, dtype) to GGUF with the
`gguf` package, llama.cpp's tensor names and, for arch "llama", convert_hf_to_gguf.py's q/k row permutation
(HF's rotate-half RoPE layout -> GGML's interleaved one; "qwen2" uses NEOX RoPE, no permutation). The cache is
--cache-dir (default DIR/../.gguf_cache); "gguf_convert_s" is the conversion's time (from a sidecar when cached).
The tokenizer written is a placeholder (SPM "llama", vocab_size dummy pieces) so llama.cpp loads the file:
token ids are fed directly. convert(..., tokenizer="char" | TOKENIZER_JSON) writes a real one instead, for llama.cpp's
OpenAI server, which takes text prompts (llamacpp_server.py).

check: logits of one random prompt (every position, one llama_decode with all outputs) against transformers'
AutoModelForCausalLM (eager, float32) on the same ids, plus the path rollout uses (prefill L-1 tokens in seq 0,
llama_memory_seq_cp 0 -> 1, decode the last token in seq 1). KV cache f32, flash attention off. Passes when the
max abs difference is <= 1e-4 * max |logit| (f32 only; other dtypes are reported, not judged). The same with
flash attention on is reported too ("flash_attn_on"): llama.cpp's CPU flash attention, which "auto" picks,
rounds through f16 (about 1e-3 relative on W1 / W2 shapes), so it is not judged.

rollout: P prompts of L random ids in [3, vocab) (seeded), each sampled G times, N new tokens per sequence at
temperature 1 (no top-k/top-p), EOS ignored (fixed length), the last sampled token not fed back (as rlcpp's bench
and torch_peer.py time it). One context, non-unified KV cache (one stream per sequence, llama.cpp's advice for
sequences that share only a short prefix), P*G sequences at once; llama.cpp allows at most 256 sequences per
context (LLAMA_MAX_SEQ), so a larger rollout runs as consecutive chunks of whole groups, the memory cleared
between them. Each prompt is prefilled once (all prompts of a chunk in one llama_decode, only the last position
outputs logits) in its group's first sequence and copied to the other G-1 with llama_memory_seq_cp; then N-1
llama_decode steps of one token per sequence. --sampler llama (default): one llama.cpp sampler chain with a
dist sampler (llama_sampler_sample per sequence); numpy: Gumbel-max over llama_get_logits in numpy.
The KV cache type defaults to --dtype (rlcpp's precision; llama.cpp's own default is f16, about 2x faster on W1:
pass --kv-type f16 for that figure) and flash attention to llama.cpp's "auto" (on, for CPU).
Times the whole rollout (prefill + every decode step + sampling) per iteration; median over --iters after --warmup.

Prints ONE JSON object on stdout (the last line); human text and llama.cpp's warnings go to stderr.
"""

import argparse
import ctypes
import hashlib
import json
import os
import statistics
import sys
import time

# Before any OpenMP runtime loads (torch in check; ggml uses its own threads, but be consistent with the other
# peers): idle OpenMP threads must sleep, not spin.
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import numpy as np  # noqa: E402

CONVERTER_VERSION = 1
LLAMA_MAX_SEQ = 256  # llama.cpp src/llama-cparams.h
GGML_TYPES = {"f32": 0, "f16": 1, "bf16": 30}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- conversion

def read_config(ckpt):
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    archs = cfg.get("architectures") or []
    if "Qwen2ForCausalLM" in archs or cfg.get("model_type") == "qwen2":
        arch = "qwen2"
    elif "LlamaForCausalLM" in archs or cfg.get("model_type") == "llama":
        arch = "llama"
    else:
        raise SystemExit(f"{ckpt}: architectures {archs}, expected LlamaForCausalLM or Qwen2ForCausalLM")
    return cfg, arch


def rope_theta(cfg):
    """rope_theta, from "rope_parameters" (transformers >= 5) or the top level; plain RoPE only."""
    if cfg.get("rope_scaling"):
        raise SystemExit(f"rope_scaling {cfg['rope_scaling']} is not supported by this converter")
    theta = cfg.get("rope_theta", 1e4)
    rope = cfg.get("rope_parameters") or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise SystemExit(f"rope_parameters {rope} is not supported by this converter (plain RoPE only)")
    if cfg.get("use_sliding_window"):
        raise SystemExit("use_sliding_window is not supported by this converter")
    return float(rope.get("rope_theta", theta))


def permute_qk(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute: HF rotate-half row order -> GGML interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def gguf_path(ckpt, dtype, cache_dir, tokenizer=None):
    ckpt = os.path.abspath(ckpt)
    st = os.stat(os.path.join(ckpt, "model.safetensors"))
    with open(os.path.join(ckpt, "config.json"), "rb") as f:
        key = f"{CONVERTER_VERSION}|{ckpt}|{st.st_size}|{st.st_mtime_ns}|{tokenizer or ''}|".encode() + f.read()
    digest = hashlib.sha256(key).hexdigest()[:12]
    cache_dir = cache_dir or os.path.join(os.path.dirname(ckpt), ".gguf_cache")
    return os.path.join(cache_dir, f"{os.path.basename(ckpt)}-{dtype}-{digest}.gguf")


W1_CHARSET = "0123456789+-*= ()/"  # rlcpp's character tokenizer: the character with index i has id 3 + i


def add_vocab(w, gguf, cfg, tokenizer):
    """The tokenizer llama.cpp reads text with. None: a placeholder (SPM "llama", dummy pieces: ids are fed directly);
    "char": rlcpp's character tokenizer (SPM pieces of one character each, no space prefix, BOS added), so text
    prompts tokenize as rlcpp's do; a tokenizer.json path: its byte-level BPE (GGUF "gpt2" with its merges, the
    "qwen2" pre-tokenizer, no BOS), as llama.cpp's own converter writes a Qwen checkpoint's."""
    n, vocab = cfg["vocab_size"], tokenizer
    ids = {k: cfg.get(k + "_token_id") for k in ("bos", "eos", "pad")}
    if vocab is None or vocab == "char":
        special = {v: k for k, v in ids.items() if isinstance(v, int) and 0 <= v < n}
        tokens, types = [], []
        for i in range(n):
            c = i - 3
            if i in special:
                tokens.append(f"<{special[i]}>"); types.append(gguf.TokenType.CONTROL)
            elif vocab == "char" and 0 <= c < len(W1_CHARSET):
                tokens.append("\u2581" if W1_CHARSET[c] == " " else W1_CHARSET[c]); types.append(gguf.TokenType.NORMAL)
            else:
                tokens.append(f"<t{i}>"); types.append(gguf.TokenType.UNUSED if vocab == "char" else gguf.TokenType.NORMAL)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * n)
        w.add_token_types([int(t) for t in types])
        w.add_add_bos_token(vocab == "char")
        if vocab == "char":
            w.add_add_space_prefix(False)
    else:
        with open(vocab) as f:
            tj = json.load(f)
        tokens = [f"[PAD{i}]" for i in range(n)]
        types = [gguf.TokenType.UNUSED] * n
        for piece, i in tj["model"]["vocab"].items():
            if i < n:
                tokens[i], types[i] = piece, gguf.TokenType.NORMAL
        for a in tj["added_tokens"]:
            if a["id"] < n:
                tokens[a["id"]] = a["content"]
                types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
        merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types([int(t) for t in types])
        w.add_token_merges(merges)
        w.add_add_bos_token(False)
    for k, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("pad", w.add_pad_token_id)):
        if isinstance(ids[k], int):
            add(ids[k])


def convert(ckpt, dtype, cache_dir=None, force=False, tokenizer=None):
    """Returns (gguf path, conversion seconds, cached?); `tokenizer` as add_vocab takes it."""
    path = gguf_path(ckpt, dtype, cache_dir, tokenizer)
    side = path + ".json"
    if not force and os.path.exists(path) and os.path.exists(side):
        with open(side) as f:
            return path, json.load(f)["convert_s"], True
    import gguf
    from safetensors import safe_open

    start = time.perf_counter()
    cfg, arch = read_config(ckpt)
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    hidden, vocab = cfg["hidden_size"], cfg["vocab_size"]
    head_dim = cfg.get("head_dim") or hidden // n_head
    tied = cfg.get("tie_word_embeddings", arch == "qwen2")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(os.path.basename(os.path.abspath(ckpt)))
    w.add_vocab_size(vocab)
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(hidden)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    if head_dim != hidden // n_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_rope_freq_base(rope_theta(cfg))
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16}[dtype]
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_vocab(w, gguf, cfg, tokenizer)

    def put(name, t):
        t = np.ascontiguousarray(t, dtype=np.float32)
        if t.ndim == 1 or dtype == "f32":  # norms and biases stay f32, as convert_hf_to_gguf.py keeps them
            w.add_tensor(name, t)
        elif dtype == "f16":
            w.add_tensor(name, t.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(t, gguf.GGMLQuantizationType.BF16),
                         raw_dtype=gguf.GGMLQuantizationType.BF16)

    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    with safe_open(os.path.join(ckpt, "model.safetensors"), "np") as f:
        keys = set(f.keys())
        put("token_embd.weight", f.get_tensor("model.embed_tokens.weight"))
        for i in range(cfg["num_hidden_layers"]):
            for hf, gg in names.items():
                k = f"model.layers.{i}.{hf}"
                if k not in keys:
                    if hf.endswith(".bias") and arch == "llama":
                        continue
                    raise SystemExit(f"{ckpt}: tensor {k} missing")
                t = f.get_tensor(k)
                if arch == "llama" and hf.startswith("self_attn.q_proj"):
                    t = permute_qk(t, n_head, n_head)
                elif arch == "llama" and hf.startswith("self_attn.k_proj"):
                    t = permute_qk(t, n_head, n_kv)
                put(f"blk.{i}.{gg}", t)
        put("output_norm.weight", f.get_tensor("model.norm.weight"))
        if not tied:
            put("output.weight", f.get_tensor("lm_head.weight"))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    seconds = time.perf_counter() - start
    with open(side, "w") as fs:
        json.dump({"convert_s": seconds, "checkpoint": os.path.abspath(ckpt), "dtype": dtype, "arch": arch}, fs)
    log(f"converted {ckpt} ({arch}, {dtype}) -> {path} in {seconds:.2f} s")
    return path, seconds, False


# ----------------------------------------------------------------------------------------------- llama.cpp

_LOG_CB = None


def load_llama(verbose):
    import llama_cpp

    global _LOG_CB

    def cb(level, text, _user):  # ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 cont
        if verbose or level in (3, 4):
            sys.stderr.write(text.decode("utf-8", "replace"))

    _LOG_CB = llama_cpp.llama_log_callback(cb)
    llama_cpp.llama_log_set(_LOG_CB, ctypes.c_void_p())
    llama_cpp.llama_backend_init()
    return llama_cpp


class Llama:
    """A model + one context with n_seq streams (non-unified KV cache)."""

    def __init__(self, lc, path, n_seq, n_ctx_seq, n_batch, n_outputs, threads, kv_type, flash_attn):
        self.lc = lc
        mp = lc.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = lc.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {path}")
        self.vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model))
        cp = lc.llama_context_default_params()
        cp.n_seq_max = n_seq
        cp.n_ctx = n_seq * n_ctx_seq
        cp.kv_unified = False
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_outputs_max = n_outputs
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.type_k = GGML_TYPES[kv_type]
        cp.type_v = GGML_TYPES[kv_type]
        cp.flash_attn_type = {"auto": lc.LLAMA_FLASH_ATTN_TYPE_AUTO, "on": lc.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                              "off": lc.LLAMA_FLASH_ATTN_TYPE_DISABLED}[flash_attn]
        cp.no_perf = True
        self.ctx = lc.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise SystemExit("llama.cpp could not create the context")
        self.mem = lc.llama_get_memory(self.ctx)
        self.n_batch = n_batch

    def batch(self, n):
        """A llama_batch of n tokens, one sequence id each, with numpy views of its arrays."""
        b = self.lc.llama_batch_init(n, 0, 1)
        views = dict(token=np.ctypeslib.as_array(b.token, shape=(n,)), pos=np.ctypeslib.as_array(b.pos, shape=(n,)),
                     n_seq_id=np.ctypeslib.as_array(b.n_seq_id, shape=(n,)),
                     logits=np.ctypeslib.as_array(b.logits, shape=(n,)))
        views["n_seq_id"][:] = 1
        return b, views

    def set_seq(self, b, seq_ids):
        for i, s in enumerate(seq_ids):
            b.seq_id[i][0] = int(s)

    def decode(self, b, n):
        b.n_tokens = n
        rc = self.lc.llama_decode(self.ctx, b)
        if rc != 0:
            raise SystemExit(f"llama_decode returned {rc}")

    def logits(self, n_out):
        p = self.lc.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(p, shape=(n_out, self.vocab))

    def close(self):
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)


# ----------------------------------------------------------------------------------------------- commands

def llama_logits(lc, path, ids, threads, kv, flash_attn):
    """(L, V) logits of one prefill with every position output, and (V,) logits of the rollout path: prefill
    L-1 tokens in seq 0, llama_memory_seq_cp 0 -> 1, decode the last token in seq 1."""
    L = len(ids)
    m = Llama(lc, path, 2, L, L, L, threads, kv, flash_attn)
    b, v = m.batch(L)
    m.set_seq(b, [0] * L)
    v["token"][:] = ids
    v["pos"][:] = np.arange(L)
    v["logits"][:] = 1
    m.decode(b, L)
    ours = m.logits(L).copy()
    lc.llama_memory_clear(m.mem, True)
    v["logits"][:] = 0
    v["logits"][L - 2] = 1
    m.decode(b, L - 1)
    lc.llama_memory_seq_cp(m.mem, 0, 1, -1, -1)
    b1, v1 = m.batch(1)
    m.set_seq(b1, [1])
    v1["token"][0] = ids[-1]
    v1["pos"][0] = L - 1
    v1["logits"][0] = 1
    m.decode(b1, 1)
    ours_cp = m.logits(1)[0].copy()
    lc.llama_batch_free(b)
    lc.llama_batch_free(b1)
    m.close()
    return ours, ours_cp


def cmd_convert(args):
    path, seconds, cached = convert(args.checkpoint, args.dtype, args.cache_dir, args.force)
    return {"peer": "llama.cpp", "command": "convert", "dtype": args.dtype, "gguf": path, "gguf_convert_s": seconds,
            "gguf_cached": cached, "gguf_bytes": os.path.getsize(path)}


def cmd_check(args):
    cfg, arch = read_config(args.checkpoint)
    path, conv_s, cached = convert(args.checkpoint, args.dtype, args.cache_dir)
    lc = load_llama(args.verbose)
    vocab, L = cfg["vocab_size"], args.prompt_len
    if L < 2 or L > cfg.get("max_position_embeddings", 1 << 30):
        raise SystemExit(f"--prompt-len {L}: expected 2 .. context")
    rng = np.random.default_rng(args.seed)
    ids = rng.integers(3, vocab, size=L).astype(np.int32)

    kv = "f32" if args.kv_type == "auto" else args.kv_type
    runs = {fa: llama_logits(lc, path, ids, args.threads, kv, fa) for fa in dict.fromkeys((args.flash_attn, "on"))}

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    hf = transformers.AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32,
                                                           attn_implementation="eager")
    hf.eval()
    with torch.inference_mode():
        ref = hf(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].float().numpy()
    scale = float(np.abs(ref).max())

    def diffs(fa):
        ours, ours_cp = runs[fa]
        return float(np.abs(ours - ref).max()), float(np.abs(ours_cp - ref[-1]).max())

    diff, diff_cp = diffs(args.flash_attn)
    rel = max(diff, diff_cp) / scale
    ok = rel <= 1e-4 if args.dtype == "f32" else None
    log(f"check {arch} {args.dtype}, flash_attn {args.flash_attn}: max |llama.cpp - HF| {diff:.3g} (all positions), "
        f"{diff_cp:.3g} (seq_cp + decode path), max |logit| {scale:.3g}, relative {rel:.3g} -> "
        f"{'PASS' if ok else 'FAIL' if ok is False else 'not judged'}")
    result = {"peer": "llama.cpp", "llama_cpp_python": lc.__version__, "transformers": transformers.__version__,
              "command": "check", "arch": arch, "dtype": args.dtype, "kv_type": kv, "flash_attn": args.flash_attn,
              "prompt_len": L, "max_abs_diff": diff, "max_abs_diff_seq_cp_decode": diff_cp, "max_abs_logit": scale,
              "max_rel_diff": rel, "pass": ok, "tolerance_rel": 1e-4}
    if args.flash_attn != "on":  # informational: llama.cpp's CPU flash attention (what "auto" picks) rounds more
        fa_diff, fa_cp = diffs("on")
        result["flash_attn_on"] = {"max_abs_diff": fa_diff, "max_abs_diff_seq_cp_decode": fa_cp,
                                   "max_rel_diff": max(fa_diff, fa_cp) / scale}
        log(f"  flash_attn on (informational): {fa_diff:.3g} (all positions), {fa_cp:.3g} (seq_cp + decode path)")
    result.update({"gguf": path, "gguf_convert_s": conv_s, "gguf_cached": cached})
    return result


def cmd_rollout(args):
    cfg, arch = read_config(args.checkpoint)
    path, conv_s, cached = convert(args.checkpoint, args.dtype, args.cache_dir)
    lc = load_llama(args.verbose)
    P, G, L, N = args.prompts, args.group, args.prompt_len, args.new_tokens
    if L + N > cfg.get("max_position_embeddings", 1 << 30):
        raise SystemExit(f"sequences of {L + N} tokens exceed the model's context {cfg['max_position_embeddings']}")
    if G > LLAMA_MAX_SEQ:
        raise SystemExit(f"--group {G} > {LLAMA_MAX_SEQ}, llama.cpp's sequences per context")
    B = P * G
    chunk_p = min(P, LLAMA_MAX_SEQ // G)  # prompts per chunk: whole groups, <= 256 sequences
    chunks = [(p0, min(P, p0 + chunk_p)) for p0 in range(0, P, chunk_p)]
    n_seq = chunk_p * G
    kv = args.dtype if args.kv_type == "auto" else args.kv_type
    n_batch = max(chunk_p * L, n_seq)
    m = Llama(lc, path, n_seq, L + N, n_batch, n_seq, args.threads, kv, args.flash_attn)
    vocab = m.vocab

    rng = np.random.default_rng(args.seed)
    prompts = rng.integers(3, vocab, size=(P, L)).astype(np.int32)
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    if args.sampler == "llama":
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(args.seed & 0xFFFFFFFF))

    # Batches built once: the prefill batch (chunk_p prompts) and the decode batch (one token per sequence).
    bp, vp = m.batch(chunk_p * L)
    m.set_seq(bp, [p * G for p in range(chunk_p) for _ in range(L)])
    vp["pos"][:] = np.tile(np.arange(L), chunk_p)
    vp["logits"][:] = 0
    vp["logits"][L - 1::L] = 1
    bd, vd = m.batch(n_seq)
    m.set_seq(bd, range(n_seq))
    vd["logits"][:] = 1

    def sample(rows, n_rows, repeat):
        """tokens for n_rows output rows (each repeated `repeat` times): llama.cpp sampler or numpy."""
        if args.sampler == "llama":
            return np.array([lc.llama_sampler_sample(chain, m.ctx, int(r)) for r in rows for _ in range(repeat)],
                            dtype=np.int32)
        logits = m.logits(n_rows)
        if repeat > 1:
            logits = np.repeat(logits, repeat, axis=0)
        g = -np.log(-np.log(rng.random(logits.shape, dtype=np.float32)))
        return np.argmax(logits + g, axis=1).astype(np.int32)

    def run():
        out = np.empty((B, N), dtype=np.int32)
        t_prefill = t_decode = 0.0
        for p0, p1 in chunks:
            np_, ns = p1 - p0, (p1 - p0) * G
            t0 = time.perf_counter()
            lc.llama_memory_clear(m.mem, True)
            vp["token"][:np_ * L] = prompts[p0:p1].reshape(-1)
            m.decode(bp, np_ * L)
            for p in range(np_):
                for j in range(1, G):
                    lc.llama_memory_seq_cp(m.mem, p * G, p * G + j, -1, -1)
            rows = [p * L + L - 1 for p in range(np_)] if args.sampler == "llama" else None
            tok = sample(rows, np_, G)
            t1 = time.perf_counter()
            seqs = out[p0 * G:p1 * G]
            seqs[:, 0] = tok
            for i in range(1, N):
                vd["token"][:ns] = tok
                vd["pos"][:ns] = L + i - 1
                m.decode(bd, ns)
                tok = sample(range(ns) if args.sampler == "llama" else None, ns, 1)
                seqs[:, i] = tok
            t2 = time.perf_counter()
            t_prefill += t1 - t0
            t_decode += t2 - t1
        return out, t_prefill * 1e3, t_decode * 1e3

    ms, parts = [], []
    for it in range(args.warmup + args.iters):
        start = time.perf_counter()
        out, pre, dec = run()
        elapsed = (time.perf_counter() - start) * 1e3
        if it >= args.warmup:
            ms.append(elapsed)
            parts.append((pre, dec))
    assert out.min() >= 0 and out.max() < vocab
    lc.llama_sampler_free(chain)
    lc.llama_batch_free(bp)
    lc.llama_batch_free(bd)
    m.close()

    med = statistics.median(ms)
    sampling = ("llama.cpp sampler chain [dist] (llama_sampler_sample per sequence, temperature 1, no top-k/top-p)"
                if args.sampler == "llama" else "numpy Gumbel-max over llama_get_logits (temperature 1, no top-k/p)")
    notes = (f"{len(chunks)} chunk(s) of <= {n_seq} sequences (llama.cpp allows {LLAMA_MAX_SEQ} per context), "
             f"non-unified KV cache (n_ctx_seq padded to 256 by llama.cpp), KV {kv}, flash_attn {args.flash_attn}; "
             f"prefill once per prompt + llama_memory_seq_cp to its {G - 1} other samples; "
             f"{N - 1} decode steps, EOS ignored; CPU only")
    result = {"peer": "llama.cpp", "llama_cpp_python": lc.__version__, "command": "rollout", "arch": arch,
              "dtype": args.dtype, "kv_type": kv, "flash_attn": args.flash_attn, "threads": args.threads,
              "prompts": P, "group": G, "prompt_len": L, "new_tokens": N, "sequences": B, "chunks": len(chunks),
              "ms": med, "ms_min": min(ms), "ms_all": ms,
              "prefill_ms": statistics.median(p for p, _ in parts), "decode_ms": statistics.median(d for _, d in parts),
              "tokens_per_s": B * N / (med / 1e3), "gguf_convert_s": conv_s, "gguf_cached": cached,
              "sampling": sampling, "notes": notes}
    log(f"rollout {P}x{G}, {L} prompt + {N} new, {args.dtype}: {med:.1f} ms ({result['tokens_per_s']:.0f} tok/s), "
        f"prefill {result['prefill_ms']:.1f} ms, decode {result['decode_ms']:.1f} ms")
    return result


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def command(name):
        c = sub.add_parser(name)
        c.add_argument("--checkpoint", required=True, help="config.json + model.safetensors (float32)")
        c.add_argument("--dtype", default="f32", choices=("f32", "bf16", "f16"))
        c.add_argument("--cache-dir", default=None, help="GGUF cache (default DIR/../.gguf_cache)")
        return c

    c = command("convert")
    c.add_argument("--force", action="store_true")
    for name, defaults in (("check", dict(prompt_len=16)),
                           ("rollout", dict(prompts=64, group=8, prompt_len=10, new_tokens=8, iters=3, warmup=1))):
        c = command(name)
        for key, value in defaults.items():
            c.add_argument("--" + key.replace("_", "-"), type=int, default=value)
        c.add_argument("--threads", type=int, default=2)
        c.add_argument("--seed", type=int, default=0)
        c.add_argument("--kv-type", default="auto", choices=("auto",) + tuple(GGML_TYPES),
                       help="KV cache type (auto: f32 for check, --dtype for rollout)")
        c.add_argument("--flash-attn", default="off" if name == "check" else "auto", choices=("auto", "on", "off"),
                       help="llama.cpp's flash attention (check: off, judged, and on, reported; rollout: auto)")
        c.add_argument("--verbose", action="store_true", help="llama.cpp's info log on stderr")
        if name == "rollout":
            c.add_argument("--sampler", default="llama", choices=("llama", "numpy"))
    args = p.parse_args(argv)
    for key in ("prompts", "group", "prompt_len", "new_tokens", "iters", "threads"):
        if getattr(args, key, 1) < 1:
            p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
    return args


def main(argv):
    args = parse_args(argv)
    result = {"convert": cmd_convert, "check": cmd_check, "rollout": cmd_rollout}[args.command](args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
