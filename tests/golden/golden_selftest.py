"""`torch_llama.py --selftest`: checks the golden reference against a second, deliberately naive
implementation (per token, per head, per rotation pair, float64), against torch.autograd.gradcheck, and
end to end through the CLI. Each check has a negative control where a plausible bug (interleaved RoPE,
wrong GQA head mapping) must make it fail, so a check that cannot fail is caught. Exit status 1 on failure.
"""

import json
import math
import os
import sys
import tempfile
import time
import traceback

import numpy as np
import torch
from torch.nn.utils.stateless import functional_call

import llama_model
import safetensors_io
import torch_llama

SMALL_CONFIGS = {
    # GQA 4 query heads over 2 kv heads, tied: the W1 shape, shrunk.
    "llama_tied_gqa": dict(model_type="llama", vocab_size=13, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, intermediate_size=40,
                           rms_norm_eps=1e-5, rope_theta=1e4, tie_word_embeddings=True),
    # Untied with q/k/v/o bias, multi-head attention (no GQA), another eps and theta.
    "llama_untied_bias": dict(model_type="llama", vocab_size=11, hidden_size=24, num_hidden_layers=2,
                              num_attention_heads=3, num_key_value_heads=3, intermediate_size=20,
                              rms_norm_eps=1e-6, rope_theta=500.0, tie_word_embeddings=False,
                              attention_bias=True),
    # Qwen2: q/k/v bias, no o bias, all query heads on one kv head.
    "qwen2_mqa": dict(model_type="qwen2", vocab_size=17, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=1, intermediate_size=24,
                      rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True),
    # Qwen3: q_norm / k_norm, no bias, head_dim 12 != hidden_size / num_attention_heads = 8, GQA.
    "qwen3_gqa": dict(model_type="qwen3", vocab_size=19, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=24, head_dim=12,
                      rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True),
}


def make_model(name, seed=0, dtype=torch.float32):
    cfg = llama_model.LlamaConfig(**SMALL_CONFIGS[name])
    return llama_model.randomize_(llama_model.LlamaForCausalLM(cfg), seed).to(dtype)


# ---- the naive second implementation (float64, loops, reads only the state dict) ----

def naive_rmsnorm(x, w, eps):  # x (C,)
    return x / torch.sqrt((x * x).mean() + eps) * w


def naive_rope(x, pos, theta, interleaved=False):
    """x (H, D) at position pos. HF's convention rotates the pair (i, i + D/2) by pos * theta^(-2i/D);
    `interleaved` rotates (2i, 2i + 1) instead (Meta's original layout), the bug the negative control plants."""
    d = x.shape[-1]
    out = x.clone()
    for i in range(d // 2):
        angle = pos * theta ** (-2.0 * i / d)
        a_idx, b_idx = (2 * i, 2 * i + 1) if interleaved else (i, i + d // 2)
        a, b = x[:, a_idx], x[:, b_idx]
        out[:, a_idx] = a * math.cos(angle) - b * math.sin(angle)
        out[:, b_idx] = b * math.cos(angle) + a * math.sin(angle)
    return out


def naive_logits(sd, cfg, tokens, interleaved_rope=False, kv_head_of=None, qk_norm_after_rope=False):
    """logits (T, V) float64 for one sequence. kv_head_of(h, hq, hkv) maps a query head to its kv head
    (default HF's repeat_kv: h // (hq / hkv)). Qwen3's q_norm / k_norm go on each head before RoPE
    (after it with qk_norm_after_rope, the bug a negative control plants)."""
    sd = {k: v.detach().double() for k, v in sd.items()}
    kv_head_of = kv_head_of or (lambda h, hq, hkv: h // (hq // hkv))
    hq, hkv, d, eps = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.rms_norm_eps
    x = [sd["model.embed_tokens.weight"][t].clone() for t in tokens]
    n = len(tokens)
    for layer in range(cfg.num_hidden_layers):
        pre = f"model.layers.{layer}."

        def linear(name, v):
            bias = sd.get(pre + name + ".bias")
            out = sd[pre + name + ".weight"] @ v
            return out if bias is None else out + bias

        def head_norm(name, heads):  # (H, D): each head's D values through the norm `name`, when the model has it
            if pre + name not in sd:
                return heads
            return torch.stack([naive_rmsnorm(head, sd[pre + name], eps) for head in heads])

        def project(name, norm, hi, t, heads):  # q or k of one position: projection, (norm,) RoPE
            y = linear(name, hi).view(heads, d)
            if not qk_norm_after_rope:
                y = head_norm(norm, y)
            y = naive_rope(y, t, cfg.rope_theta, interleaved_rope)
            return head_norm(norm, y) if qk_norm_after_rope else y

        h = [naive_rmsnorm(xi, sd[pre + "input_layernorm.weight"], eps) for xi in x]
        q = [project("self_attn.q_proj", "self_attn.q_norm.weight", hi, t, hq) for t, hi in enumerate(h)]
        k = [project("self_attn.k_proj", "self_attn.k_norm.weight", hi, t, hkv) for t, hi in enumerate(h)]
        v = [linear("self_attn.v_proj", hi).view(hkv, d) for hi in h]
        for t in range(n):
            heads = []
            for head in range(hq):
                g = kv_head_of(head, hq, hkv)
                scores = torch.stack([q[t][head] @ k[s][g] for s in range(t + 1)]) / math.sqrt(d)
                w = torch.exp(scores - scores.max())
                w = w / w.sum()
                heads.append(sum(w[s] * v[s][g] for s in range(t + 1)))
            x[t] = x[t] + linear("self_attn.o_proj", torch.cat(heads))
        for t in range(n):
            hi = naive_rmsnorm(x[t], sd[pre + "post_attention_layernorm.weight"], eps)
            gate, up = linear("mlp.gate_proj", hi), linear("mlp.up_proj", hi)
            x[t] = x[t] + linear("mlp.down_proj", gate / (1 + torch.exp(-gate)) * up)
    head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])
    return torch.stack([head @ naive_rmsnorm(xi, sd["model.norm.weight"], eps) for xi in x])


def max_diff(a, b):
    d = (a.double() - b.double()).abs().max().item()
    return float("nan") if math.isnan(d) else d


def expect_close(what, a, b, tol):
    d = max_diff(a, b)
    if not d <= tol:  # NaN fails too
        raise AssertionError(f"{what}: max |diff| {d:.3e} > {tol:.1e}")


def expect_far(what, a, b, at_least):
    d = max_diff(a, b)
    if not d > at_least:
        raise AssertionError(f"negative control {what}: max |diff| {d:.3e}, expected > {at_least:.1e} "
                             f"(the check could not tell this bug apart)")


# ---- checks ----

def check_safetensors_round_trip():
    rng = np.random.default_rng(1)
    tensors = {"a": rng.standard_normal((3, 5)).astype(np.float32), "scalar": np.float32(2.5),
               "empty": np.zeros((0, 4), np.float32), "ids": np.arange(7, dtype=np.int64),
               "t": torch.randn(2, 3, 4, dtype=torch.float64)}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.safetensors")
        safetensors_io.write(path, tensors, metadata={"k": "v"})
        back = safetensors_io.read(path)
        header, meta, start = safetensors_io.read_header(path)
        assert list(back) == list(tensors), f"names/order changed: {list(back)}"
        assert meta == {"k": "v"} and start % 8 == 0, f"metadata {meta}, data start {start}"
        assert header["t"]["dtype"] == "F32" and header["ids"]["dtype"] == "I64", header
        for name, value in tensors.items():
            want = value.float().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            assert back[name].shape == want.shape and np.array_equal(back[name], want.astype(back[name].dtype)), name
        with open(path, "rb") as f:
            raw = f.read()
        with open(path, "wb") as f:
            f.write(raw[:-3])  # truncated data must be refused, not read short
        try:
            safetensors_io.read(path)
        except safetensors_io.SafetensorsError:
            pass
        else:
            raise AssertionError("a truncated file was read without error")


def check_checkpoint_round_trip():
    for name in SMALL_CONFIGS:
        model = make_model(name, seed=3)
        with tempfile.TemporaryDirectory() as tmp:
            llama_model.save_checkpoint(model, tmp)
            back = llama_model.load_checkpoint(tmp)
            want = dict(model.named_parameters())
            got = dict(back.named_parameters())
            assert list(got) == list(want), f"{name}: parameter names differ"
            for p in want:
                assert torch.equal(got[p], want[p]), f"{name}: {p} changed in the round trip"
    expected = {"model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.o_proj.bias", "lm_head.weight"}
    names = set(dict(make_model("llama_untied_bias").named_parameters()))
    assert expected <= names, f"llama attention_bias untied lacks {expected - names}"
    names = set(dict(make_model("qwen2_mqa").named_parameters()))
    assert "model.layers.0.self_attn.k_proj.bias" in names and "model.layers.0.self_attn.o_proj.bias" not in names
    assert "lm_head.weight" not in names, "a tied model must not own an lm_head parameter"
    names = dict(make_model("qwen3_gqa").named_parameters())
    assert names["model.layers.1.self_attn.q_norm.weight"].shape == (12,), "q_norm is over one head's head_dim"
    assert names["model.layers.1.self_attn.k_norm.weight"].shape == (12,), "k_norm is over one head's head_dim"
    assert names["model.layers.0.self_attn.q_proj.weight"].shape == (48, 32), "q_proj is (Hq * head_dim, C)"
    assert "model.layers.0.self_attn.q_proj.bias" not in names, "qwen3 without attention_bias has no q bias"


def check_rope_rotate_half():
    torch.manual_seed(0)
    d, theta, n = 8, 100.0, 6
    x = torch.randn(1, 3, n, d, dtype=torch.float64)  # (B, H, T, D)
    cos, sin = llama_model.rope_cos_sin(d, theta, torch.arange(n), torch.float64)
    got = llama_model.apply_rope(x, cos, sin)
    want = torch.stack([naive_rope(x[0, :, t], t, theta) for t in range(n)], dim=1)[None]
    expect_close("RoPE vs explicit (i, i+D/2) rotation", got, want, 1e-6)  # cos/sin come from fp32 like HF
    bad = torch.stack([naive_rope(x[0, :, t], t, theta, interleaved=True) for t in range(n)], dim=1)[None]
    expect_far("interleaved RoPE", got, bad, 1e-2)
    # A rotation keeps each pair's norm.
    half = d // 2
    pair_norm = lambda y: y[..., :half] ** 2 + y[..., half:] ** 2  # noqa: E731
    expect_close("RoPE keeps pair norms", pair_norm(got), pair_norm(x), 1e-5)  # fp32 cos/sin


def check_rmsnorm():
    torch.manual_seed(0)
    norm = llama_model.RMSNorm(16, 1e-5).double()
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(5, 16, dtype=torch.float64)
    want = torch.stack([naive_rmsnorm(r, norm.weight, 1e-5) for r in x])
    expect_close("RMSNorm", norm(x), want, 1e-12)


def check_model_vs_naive():
    """Whole model against the naive loops, covering GQA/MQA/MHA, biases, tied/untied, RoPE and the mask."""
    tokens = [3, 1, 4, 1, 5, 9, 2, 6]
    for name in SMALL_CONFIGS:
        model = make_model(name, seed=5)
        cfg = model.config
        sd = dict(model.named_parameters())
        toks = [t % cfg.vocab_size for t in tokens]
        want = naive_logits(sd, cfg, toks)
        with torch.no_grad():
            got32 = model(torch.tensor([toks]))[0]
            got64 = model.double()(torch.tensor([toks]))[0]
        expect_close(f"{name} fp64 logits vs naive", got64, want, 1e-6)
        expect_close(f"{name} fp32 logits vs naive", got32, want, 1e-4)
        expect_far(f"{name} with interleaved RoPE", got64, naive_logits(sd, cfg, toks, interleaved_rope=True), 1e-3)
        if cfg.has_qk_norm:
            expect_far(f"{name} with q/k norm after RoPE", got64,
                       naive_logits(sd, cfg, toks, qk_norm_after_rope=True), 1e-3)
        if cfg.num_key_value_heads not in (1, cfg.num_attention_heads):
            wrong = naive_logits(sd, cfg, toks, kv_head_of=lambda h, hq, hkv: h % hkv)
            expect_far(f"{name} with kv head h % Hkv", got64, wrong, 1e-3)


def check_gqa_repeat_kv():
    torch.manual_seed(0)
    k = torch.randn(2, 3, 5, 4)
    r = llama_model.repeat_kv(k, 4)
    for h in range(12):
        assert torch.equal(r[:, h], k[:, h // 4]), f"repeat_kv head {h} is not kv head {h // 4}"


def check_kv_cache_decode():
    for name in SMALL_CONFIGS:
        model = make_model(name, seed=7)
        gen = torch.Generator().manual_seed(1)
        tokens = torch.randint(0, model.config.vocab_size, (3, 9), generator=gen)
        with torch.no_grad():
            full = model(tokens)
            cache = llama_model.KVCache(model.config, batch=3, max_len=9)
            steps = [model(tokens[:, :4], cache, 0)]
            for t in range(4, 9):
                steps.append(model(tokens[:, t:t + 1], cache, t))
        expect_close(f"{name} prefill + decode vs full forward", torch.cat(steps, dim=1), full, 2e-5)


def check_loss_and_logp():
    model = make_model("llama_untied_bias", seed=9).double()
    seqs = [torch.tensor([1, 2, 3, 4, 5]), torch.tensor([7, 0, 2]), torch.tensor([4])]
    masks = [torch.tensor([0., 1., 1., 1., 0.]), torch.tensor([1., 1., 0.]), torch.tensor([0.])]
    temperature = 0.7
    loss, logits, logp = torch_llama.batch_loss(model, seqs, masks, temperature)
    total, count, row = 0.0, 0.0, 0
    for seq, mask in zip(seqs, masks):
        for t in range(len(seq)):
            if t + 1 < len(seq):
                z = logits[row] / temperature
                want = z[seq[t + 1]] - math.log(torch.exp(z - z.max()).sum().item()) - z.max()
                expect_close(f"logp row {row}", logp[row], want, 1e-12)
                total += float(mask[t]) * want.item()
                count += float(mask[t])
            else:
                assert logp[row].item() == 0.0, f"logp at a last position is {logp[row].item()}, expected 0"
            row += 1
    expect_close("loss", loss, torch.tensor(-total / count, dtype=torch.float64), 1e-12)


def check_gradcheck():
    """Every gradient of the batch loss against finite differences, float64, two configs."""
    for name in ("qwen2_mqa", "llama_untied_bias", "qwen3_gqa"):
        fields = dict(SMALL_CONFIGS[name], hidden_size=8, num_hidden_layers=1, intermediate_size=6, vocab_size=7,
                      num_attention_heads=2, num_key_value_heads=1 if name == "qwen2_mqa" else 2)
        model = llama_model.randomize_(llama_model.LlamaForCausalLM(llama_model.LlamaConfig(**fields)), 11).double()
        names = [n for n, _ in model.named_parameters()]
        seqs = [torch.tensor([1, 5, 2, 6]), torch.tensor([3, 0, 4])]
        masks = [torch.tensor([1., 0., 1., 0.]), torch.tensor([1., 1., 0.])]

        def loss_of(*params):
            wrapped = _ParamsAsModule(model, dict(zip(names, params)))
            return torch_llama.batch_loss(wrapped, seqs, masks, 0.8)[0]

        inputs = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())
        if not torch.autograd.gradcheck(loss_of, inputs, eps=1e-6, atol=1e-7, rtol=1e-5):
            raise AssertionError(f"{name}: gradcheck failed")


class _ParamsAsModule:
    """Calls `model` with its parameters replaced, so gradcheck can differentiate with respect to them."""

    def __init__(self, model, params):
        self.model, self.params, self.config = model, params, model.config

    def __call__(self, tokens):
        return functional_call(self.model, self.params, (tokens,))


def check_tied_gradient_sums_both_uses():
    tied = make_model("qwen2_mqa", seed=13)
    untied = llama_model.LlamaForCausalLM(llama_model.LlamaConfig(**dict(SMALL_CONFIGS["qwen2_mqa"],
                                                                         tie_word_embeddings=False)))
    with torch.no_grad():
        for n, p in untied.named_parameters():
            p.copy_(dict(tied.named_parameters())["model.embed_tokens.weight" if n == "lm_head.weight" else n])
    seqs, masks = [torch.tensor([1, 2, 3, 4])], [torch.tensor([1., 1., 1., 0.])]
    for m in (tied, untied):
        torch_llama.batch_loss(m, seqs, masks, 1.0)[0].backward()
    u = dict(untied.named_parameters())
    want = u["model.embed_tokens.weight"].grad + u["lm_head.weight"].grad
    expect_close("tied embed grad = embed grad + lm_head grad", tied.model.embed_tokens.weight.grad, want, 1e-6)


def _adamw_by_hand(model, seqs, masks, steps, lr, b1, b2, eps, wd, temperature):
    """The AdamW rlcpp implements (decoupled decay, bias-corrected moments), written out, on `model`."""
    m = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    v = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    losses = []
    for step in range(1, steps + 1):
        model.zero_grad(set_to_none=True)
        loss = torch_llama.batch_loss(model, seqs, masks, temperature)[0]
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for n, p in model.named_parameters():
                g = p.grad
                p.mul_(1 - lr * wd)
                m[n] = b1 * m[n] + (1 - b1) * g
                v[n] = b2 * v[n] + (1 - b2) * g * g
                p.sub_(lr * (m[n] / (1 - b1 ** step)) / ((v[n] / (1 - b2 ** step)).sqrt() + eps))
    return losses


def check_cli_end_to_end():
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, batch, out = os.path.join(tmp, "ckpt"), os.path.join(tmp, "batch.json"), os.path.join(tmp, "o.st")
        cfg = dict(SMALL_CONFIGS["llama_tied_gqa"])
        torch_llama.main(["--write-random-checkpoint", ckpt, "--config", json.dumps(cfg), "--seed", "17"])
        seqs = [[1, 5, 6, 7, 3, 2], [1, 9, 9], [1, 4, 12, 0, 0, 11, 2, 3]]
        masks = [[0, 0, 1, 1, 1, 0], [1, 1, 0], [0, 1, 1, 1, 1, 1, 1, 0]]
        with open(batch, "w") as f:
            json.dump({"sequences": seqs, "loss_mask": masks}, f)
        k, lr, wd = 4, 1e-2, 0.1
        rc = torch_llama.main(["--model", ckpt, "--batch", batch, "--out", out, "--adamw-steps", str(k),
                               "--lr", str(lr), "--weight-decay", str(wd), "--temperature", "0.9"])
        assert rc == 0, f"CLI returned {rc}"
        got = safetensors_io.read(out)
        model = llama_model.load_checkpoint(ckpt)
        names = [n for n, _ in model.named_parameters()]
        want_keys = (["logits", "logp", "loss"] + [f"grad.{n}" for n in names] + ["adamw_losses"]
                     + [f"final.{n}" for n in names])
        assert list(got) == want_keys, f"keys {list(got)}, expected {want_keys}"
        n_tok = sum(len(s) for s in seqs)
        assert got["logits"].shape == (n_tok, cfg["vocab_size"]) and got["logp"].shape == (n_tok,), "shapes"
        tseqs = [torch.tensor(s) for s in seqs]
        tmasks = [torch.tensor(m, dtype=torch.float32) for m in masks]
        loss, logits, logp = torch_llama.batch_loss(model, tseqs, tmasks, 0.9)
        expect_close("CLI logits", torch.from_numpy(got["logits"]), logits, 0)
        expect_close("CLI logp", torch.from_numpy(got["logp"]), logp, 0)
        loss.backward()
        for n, p in model.named_parameters():
            expect_close(f"CLI grad.{n}", torch.from_numpy(got[f"grad.{n}"]), p.grad, 0)
        losses = got["adamw_losses"]
        assert losses.shape == (k,) and losses[0] == got["loss"][0], f"adamw_losses {losses} vs loss {got['loss']}"
        assert losses[-1] < losses[0], f"AdamW did not lower the loss on its own batch: {losses}"
        by_hand = llama_model.load_checkpoint(ckpt)
        hand_losses = _adamw_by_hand(by_hand, tseqs, tmasks, k, lr, 0.9, 0.95, 1e-8, wd, 0.9)
        expect_close("AdamW losses vs by hand", torch.tensor(losses), torch.tensor(hand_losses), 1e-5)
        for n, p in by_hand.named_parameters():
            expect_close(f"final.{n} vs AdamW by hand", torch.from_numpy(got[f"final.{n}"]), p, 1e-5)
        moved = max(max_diff(torch.from_numpy(got[f"final.{n}"]), p) for n, p in model.named_parameters())
        expect_far("final parameters equal to the loaded ones", torch.tensor(moved), torch.tensor(0.0), 1e-3)


def check_batch_validation():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "b.json")
        bad_batches = {
            "last mask 1": {"sequences": [[1, 2]], "loss_mask": [[1, 1]]},
            "length mismatch": {"sequences": [[1, 2, 3]], "loss_mask": [[1, 0]]},
            "token out of vocab": {"sequences": [[1, 99]], "loss_mask": [[1, 0]]},
            "all-zero mask": {"sequences": [[1, 2]], "loss_mask": [[0, 0]]},
        }
        for what, batch in bad_batches.items():
            with open(path, "w") as f:
                json.dump(batch, f)
            try:
                torch_llama.load_batch(path, 13)
            except ValueError:
                continue
            raise AssertionError(f"a batch with {what} was accepted")


CHECKS = [check_safetensors_round_trip, check_checkpoint_round_trip, check_rope_rotate_half, check_rmsnorm,
          check_gqa_repeat_kv, check_model_vs_naive, check_kv_cache_decode, check_loss_and_logp,
          check_tied_gradient_sums_both_uses, check_gradcheck, check_batch_validation, check_cli_end_to_end]


def run():
    failed = 0
    for check in CHECKS:
        start = time.time()
        try:
            check()
            status = "ok"
        except Exception:  # report every failing check, not only the first
            failed += 1
            status = "FAILED\n" + traceback.format_exc()
        print(f"{check.__name__}: {status} ({time.time() - start:.1f} s)", file=sys.stderr)
    print(f"selftest: {len(CHECKS) - failed}/{len(CHECKS)} checks passed", file=sys.stderr)
    return 1 if failed else 0
