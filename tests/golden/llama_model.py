"""Pure-PyTorch Llama / Qwen2 / Qwen3 causal LM, written to compute exactly what Hugging Face transformers'
LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM compute in fp32 (eager attention, no rope scaling, silu
MLP). Qwen3 is Qwen2's decoder with q/k/v (and o) bias only when attention_bias, an explicit head_dim, and
q_norm / k_norm: an RMSNorm over each head of q and of k, after the projections and before RoPE.

It is rlcpp's golden reference (tests/golden/torch_llama.py) and the model of the PyTorch CPU peer
(bench/peers/torch_peer.py). Module and parameter names are Hugging Face's, so `named_parameters()` yields
model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ..., lm_head.weight (untied only).

Shapes: B batch, T tokens in this call, S = start_pos + T keys, C hidden, Hq query heads, Hkv key/value heads,
D head_dim (config.json's, else C / Hq), F intermediate, V vocab.
"""

import json
import math
import os
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

import safetensors_io

# HF config keys whose values do not change the computation of this model.
_KEYS_WITHOUT_EFFECT = {
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "use_cache",
    "initializer_range", "max_position_embeddings", "transformers_version", "max_window_layers",
    "attention_dropout", "pretraining_tp", "sliding_window", "rope_scaling", "hidden_act",
    "mlp_bias", "use_sliding_window", "dtype", "layer_types",
}

# Negative control of the golden test (torch_llama.py --qk-norm-placement after_rope): Qwen3's q_norm / k_norm
# applied after RoPE instead of before it. rlcpp must NOT match the model this gives.
QK_NORM_AFTER_ROPE = False


@dataclass
class LlamaConfig:
    model_type: str = "llama"
    vocab_size: int = 32
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 352
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1e4
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    max_position_embeddings: int = 64
    head_dim: int = 0  # 0: hidden_size // num_attention_heads (set in __post_init__)

    def __post_init__(self):
        if not self.head_dim and self.num_attention_heads > 0 and self.hidden_size % self.num_attention_heads == 0:
            self.head_dim = self.hidden_size // self.num_attention_heads

    @property
    def has_qkv_bias(self):  # Qwen2 always has q/k/v bias; Llama and Qwen3 when attention_bias
        return self.model_type == "qwen2" or self.attention_bias

    @property
    def has_o_bias(self):  # Qwen2 never has o_proj bias; Llama and Qwen3 when attention_bias
        return self.model_type != "qwen2" and self.attention_bias

    @property
    def has_qk_norm(self):  # Qwen3's q_norm and k_norm
        return self.model_type == "qwen3"

    def validate(self, where):
        def fail(key, value, expected):
            raise ValueError(f"{where}: {key} = {value!r}, expected {expected}")
        if self.model_type not in ("llama", "qwen2", "qwen3"):
            fail("model_type", self.model_type, '"llama", "qwen2" or "qwen3"')
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "intermediate_size"):
            if getattr(self, key) <= 0:
                fail(key, getattr(self, key), "a positive integer")
        if not self.head_dim:
            fail("hidden_size", self.hidden_size, f"a multiple of num_attention_heads {self.num_attention_heads} "
                 f"(no head_dim given)")
        if self.num_attention_heads % self.num_key_value_heads:
            fail("num_key_value_heads", self.num_key_value_heads,
                 f"a divisor of num_attention_heads {self.num_attention_heads}")
        if self.head_dim <= 0 or self.head_dim % 2:
            fail("head_dim", self.head_dim, "positive and even (RoPE rotates pairs)")
        if not self.rms_norm_eps > 0:
            fail("rms_norm_eps", self.rms_norm_eps, "> 0")
        if not self.rope_theta > 0:
            fail("rope_theta", self.rope_theta, "> 0")

    @staticmethod
    def from_hf_json(j, where):
        """Reads a Hugging Face config.json dict. Optional keys take HF's defaults; keys that would change
        the computation in ways this model does not implement are rejected, naming the key."""
        def need(key):
            if key not in j:
                raise ValueError(f"{where}: missing key '{key}'")
            return j[key]
        if j.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{where}: hidden_act = {j['hidden_act']!r}, expected \"silu\"")
        if j.get("rope_scaling") not in (None, {}):
            raise ValueError(f"{where}: rope_scaling = {j['rope_scaling']!r} is not supported (expected null)")
        if j.get("mlp_bias", False):
            raise ValueError(f"{where}: mlp_bias = true is not supported (expected false)")
        if j.get("use_sliding_window", False):
            raise ValueError(f"{where}: use_sliding_window = true is not supported (expected false)")
        if any(t != "full_attention" for t in j.get("layer_types") or []):
            raise ValueError(f"{where}: layer_types = {j['layer_types']!r} is not supported (expected "
                             f"\"full_attention\" only)")
        cfg = LlamaConfig(
            model_type=need("model_type"),
            vocab_size=int(need("vocab_size")),
            hidden_size=int(need("hidden_size")),
            num_hidden_layers=int(need("num_hidden_layers")),
            num_attention_heads=int(need("num_attention_heads")),
            num_key_value_heads=int(j.get("num_key_value_heads") or need("num_attention_heads")),
            intermediate_size=int(need("intermediate_size")),
            rms_norm_eps=float(j.get("rms_norm_eps", 1e-6)),
            rope_theta=float(j.get("rope_theta", 10000.0)),
            tie_word_embeddings=bool(j.get("tie_word_embeddings", False)),
            attention_bias=bool(j.get("attention_bias", False)),
            max_position_embeddings=int(j.get("max_position_embeddings", 64)),
            # Qwen3Config's default head_dim is 128; LlamaConfig's and Qwen2's hidden_size / num_attention_heads.
            head_dim=int(j.get("head_dim") or (128 if j.get("model_type") == "qwen3" else 0)),
        )
        cfg.validate(where)
        unknown = set(j) - set(asdict(cfg)) - _KEYS_WITHOUT_EFFECT - {"model_type"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} (they might change the computation)")
        return cfg

    def to_hf_json(self):
        j = asdict(self)
        family = {"qwen2": "Qwen2", "qwen3": "Qwen3"}.get(self.model_type, "Llama")
        j["architectures"] = [family + "ForCausalLM"]
        j["hidden_act"] = "silu"
        j["torch_dtype"] = "float32"
        if self.model_type == "qwen2":
            del j["attention_bias"]  # Qwen2Config has no such key: its q/k/v bias is fixed
        return j


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):  # x (..., C)
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope_cos_sin(head_dim, theta, positions, dtype):
    """cos, sin (T, D) for integer positions (T,). Computed in fp32 like HF, then cast to `dtype`."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # (D/2)
    freqs = positions.float()[:, None] * inv_freq[None, :]  # (T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D): element i and i + D/2 share a frequency
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):  # (..., D) -> (-x[D/2:], x[:D/2])
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):  # x (B, H, T, D), cos/sin (T, D)
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):  # (B, Hkv, S, D) -> (B, Hkv * n_rep, S, D); query head h reads kv head h // n_rep
    if n_rep == 1:
        return x
    b, hkv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, hkv, n_rep, s, d).reshape(b, hkv * n_rep, s, d)


class KVCache:
    """Preallocated keys and values (L, B, Hkv, max_len, D), after RoPE, before repeat_kv. All sequences of
    the batch share one position, so a call writes slots [start_pos, start_pos + T)."""

    def __init__(self, cfg, batch, max_len, dtype=torch.float32):
        shape = (cfg.num_hidden_layers, batch, cfg.num_key_value_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype)
        self.v = torch.zeros(shape, dtype=dtype)
        self.max_len = max_len


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, d = cfg.hidden_size, cfg.head_dim
        self.hq, self.hkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.q_proj = nn.Linear(c, self.hq * d, bias=cfg.has_qkv_bias)
        self.k_proj = nn.Linear(c, self.hkv * d, bias=cfg.has_qkv_bias)
        self.v_proj = nn.Linear(c, self.hkv * d, bias=cfg.has_qkv_bias)
        self.o_proj = nn.Linear(self.hq * d, c, bias=cfg.has_o_bias)
        if cfg.has_qk_norm:  # Qwen3: one RMSNorm over each head's D values of q, one of k
            self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.qk_norm = cfg.has_qk_norm

    def forward(self, x, cos, sin, cache=None, layer=0, start_pos=0):  # x (B, T, C) -> (B, T, C)
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.hq, self.d)  # (B, T, Hq, D)
        k = self.k_proj(x).view(b, t, self.hkv, self.d)  # (B, T, Hkv, D)
        v = self.v_proj(x).view(b, t, self.hkv, self.d).transpose(1, 2)  # (B, Hkv, T, D)
        norm_first = self.qk_norm and not QK_NORM_AFTER_ROPE
        if norm_first:  # as Qwen3Attention: q_norm(q_proj(x)), then RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q.transpose(1, 2), cos, sin), apply_rope(k.transpose(1, 2), cos, sin)  # (B, H, T, D)
        if self.qk_norm and not norm_first:
            q, k = self.q_norm(q), self.k_norm(k)
        if cache is not None:
            cache.k[layer, :, :, start_pos:start_pos + t] = k
            cache.v[layer, :, :, start_pos:start_pos + t] = v
            k = cache.k[layer, :, :, :start_pos + t]  # (B, Hkv, S, D)
            v = cache.v[layer, :, :, :start_pos + t]
        k, v = repeat_kv(k, self.hq // self.hkv), repeat_kv(v, self.hq // self.hkv)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.d ** -0.5  # (B, Hq, T, S); HF's `scaling`
        s = k.shape[2]
        if t > 1:
            # Query i sits at position start_pos + i and sees keys j <= start_pos + i. HF adds finfo.min
            # instead of -inf; after softmax both give exactly 0 since the diagonal is never masked.
            future = torch.arange(s)[None, :] > (start_pos + torch.arange(t))[:, None]  # (T, S)
            scores = scores.masked_fill(future, float("-inf"))
        probs = F.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.hq * self.d)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, f = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(c, f, bias=False)
        self.up_proj = nn.Linear(c, f, bias=False)
        self.down_proj = nn.Linear(f, c, bias=False)

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache, layer, start_pos):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, layer, start_pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):  # HF's LlamaModel / Qwen2Model: the `model.` prefix of every parameter name
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        cfg.validate("LlamaForCausalLM")
        self.config = cfg
        self.model = Backbone(cfg)
        # Tied: logits use model.embed_tokens.weight and there is no lm_head parameter at all, so a tied
        # model's embedding gradient sums both uses.
        self.lm_head = None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, tokens, cache=None, start_pos=0):
        """tokens (B, T) int64 at positions start_pos.. -> logits (B, T, V). With a cache, keys and values of
        these tokens are stored in it and attention reads all S = start_pos + T cached positions."""
        if cache is not None and start_pos + tokens.shape[1] > cache.max_len:
            raise ValueError(f"KV cache holds {cache.max_len} positions, asked for "
                             f"{start_pos + tokens.shape[1]}")
        x = self.model.embed_tokens(tokens)
        positions = torch.arange(start_pos, start_pos + tokens.shape[1])
        cos, sin = rope_cos_sin(self.config.head_dim, self.config.rope_theta, positions, x.dtype)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, cache, i, start_pos)
        x = self.model.norm(x)
        if self.lm_head is None:
            return torch.matmul(x, self.model.embed_tokens.weight.t())
        return self.lm_head(x)


def randomize_(model, seed):
    """Seeded weights that exercise every parameter: matrices N(0, 1/fan_in), embeddings N(0, 1/hidden) (so
    tied logits have a standard deviation near 1), biases N(0, 0.1^2), norm weights 1 + N(0, 0.1^2). Biases
    and norm weights are deliberately off their trivial values (0 and 1) so a test that gets them wrong can
    fail."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if name.endswith("norm.weight"):  # input/post_attention_layernorm, q_norm, k_norm, model.norm
                value = 1.0 + 0.1 * noise
            elif name.endswith(".bias"):
                value = 0.1 * noise
            else:
                value = noise / math.sqrt(p.shape[1])
            p.copy_(value.to(p.dtype))
    return model


def save_checkpoint(model, directory):
    """Writes config.json and model.safetensors (F32) in Hugging Face's layout."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.config.to_hf_json(), f, indent=2)
        f.write("\n")
    safetensors_io.write(os.path.join(directory, "model.safetensors"),
                         {n: p.detach().float() for n, p in model.named_parameters()})


def load_checkpoint(directory):
    """Reads config.json + model.safetensors from `directory` into a float32 LlamaForCausalLM. Every parameter
    must be present with its shape and dtype F32; extra tensors are rejected, except a tied checkpoint's
    lm_head.weight when it equals model.embed_tokens.weight."""
    config_path = os.path.join(directory, "config.json")
    weights_path = os.path.join(directory, "model.safetensors")
    with open(config_path) as f:
        cfg = LlamaConfig.from_hf_json(json.load(f), config_path)
    header, _, _ = safetensors_io.read_header(weights_path)
    for name, info in header.items():
        if info.get("dtype") != "F32":
            raise ValueError(f"{weights_path}: tensor '{name}' has dtype {info.get('dtype')}, expected F32")
    tensors = safetensors_io.read(weights_path)
    model = LlamaForCausalLM(cfg)
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(tensors))
    if missing:
        raise ValueError(f"{weights_path}: missing tensors {missing}")
    extra = sorted(set(tensors) - set(params))
    if cfg.tie_word_embeddings and "lm_head.weight" in extra:
        if not (tensors["lm_head.weight"] == tensors["model.embed_tokens.weight"]).all():
            raise ValueError(f"{weights_path}: tie_word_embeddings is true but lm_head.weight differs from "
                             f"model.embed_tokens.weight")
        extra.remove("lm_head.weight")
    if extra:
        raise ValueError(f"{weights_path}: unexpected tensors {extra} for this config")
    with torch.no_grad():
        for name, p in params.items():
            t = tensors[name]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"{weights_path}: tensor '{name}' has shape {list(t.shape)}, "
                                 f"expected {list(p.shape)}")
            p.copy_(torch.from_numpy(t))
    return model
