#!/usr/bin/python3
"""Golden reference for rlcpp's model: loads an rlcpp checkpoint, runs the Hugging Face-equivalent PyTorch
model (llama_model.py) in fp32 on a batch of sequences, and writes logits, log-probs, loss, every gradient
and, optionally, K AdamW steps to a safetensors file the C++ tests compare against.

  torch_llama.py --model DIR --batch BATCH.json --out OUT.safetensors [--adamw-steps K --lr 1e-3
                 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --temperature 1.0
                 --rope-convention rotate_half --qk-norm-placement before_rope]
  torch_llama.py --model DIR --lora ADAPTER_DIR ...   (LoRA: see attach_lora; gradients of the adapters only)
  torch_llama.py --write-random-checkpoint DIR --config '{"model_type": "llama", ...}' --seed S
  torch_llama.py --selftest

BATCH.json = {"sequences": [[ids...], ...], "loss_mask": [[0/1 per token], ...]}. Each sequence runs on its
own from position 0. Position t predicts token t + 1; loss_mask[t] says whether that prediction counts (the
last position has no target, so its mask must be 0).
  logp[t] = log_softmax(logits[t] / temperature)[tok[t + 1]]   (0 at the last position)
  loss    = -sum(mask * logp) / sum(mask)                        (one scalar over the whole batch)
OUT.safetensors (all F32): logits (N, V) raw (not divided by temperature), logp (N,), loss (1,),
grad.<name> for every parameter; with K > 0 also adamw_losses (K,) (the loss before each step, so
adamw_losses[0] == loss) and final.<name> for every parameter after K steps. N = total tokens, sequences
concatenated in order.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import llama_model  # noqa: E402
import safetensors_io  # noqa: E402


def load_batch(path, vocab_size):
    """Returns (sequences, masks) as lists of int64 / float32 tensors, checked against the rules above."""
    with open(path) as f:
        j = json.load(f)
    for key in ("sequences", "loss_mask"):
        if key not in j or not isinstance(j[key], list):
            raise ValueError(f"{path}: missing list '{key}'")
    if len(j["sequences"]) != len(j["loss_mask"]) or not j["sequences"]:
        raise ValueError(f"{path}: {len(j['sequences'])} sequences and {len(j['loss_mask'])} loss_mask rows, "
                         f"expected the same non-zero number")
    sequences, masks = [], []
    for i, (seq, mask) in enumerate(zip(j["sequences"], j["loss_mask"])):
        if len(seq) < 1 or len(seq) != len(mask):
            raise ValueError(f"{path}: sequences[{i}] has {len(seq)} tokens and loss_mask[{i}] {len(mask)} "
                             f"entries, expected the same non-zero number")
        bad = [t for t in seq if not (isinstance(t, int) and 0 <= t < vocab_size)]
        if bad:
            raise ValueError(f"{path}: sequences[{i}] has token {bad[0]!r}, expected ids in [0, {vocab_size})")
        if any(m not in (0, 1) for m in mask):
            raise ValueError(f"{path}: loss_mask[{i}] holds values other than 0 and 1")
        if mask[-1] != 0:
            raise ValueError(f"{path}: loss_mask[{i}][-1] = 1, but the last position has no target (expected 0)")
        sequences.append(torch.tensor(seq, dtype=torch.int64))
        masks.append(torch.tensor(mask, dtype=torch.float32))
    if sum(float(m.sum()) for m in masks) == 0:
        raise ValueError(f"{path}: loss_mask is all zero, the loss would be 0/0")
    return sequences, masks


ROW = [0]  # the first row of the sequence running now in the concatenation of the batch (LoRA dropout masks)


def batch_loss(model, sequences, masks, temperature):
    """Runs each sequence on its own. Returns (loss scalar, logits (N, V), logp (N,))."""
    all_logits, all_logp = [], []
    ROW[0] = 0
    for seq in sequences:
        logits = model(seq[None, :])[0]  # (T, V)
        ROW[0] += seq.shape[0]
        logp_all = F.log_softmax(logits / temperature, dim=-1)
        target_logp = logp_all[:-1].gather(1, seq[1:, None])[:, 0]  # (T - 1,)
        all_logits.append(logits)
        all_logp.append(torch.cat([target_logp, target_logp.new_zeros(1)]))
    logits, logp = torch.cat(all_logits), torch.cat(all_logp)
    mask = torch.cat(masks).to(logp.dtype)
    return -(mask * logp).sum() / mask.sum(), logits, logp


class LoraLinear(torch.nn.Module):
    """PEFT's LoRA Linear, unmerged: y = base(x) + scale * (x A^T) B^T; the base frozen, A (r, in) and B (out, r)
    trained."""

    def __init__(self, base, a, b, scale):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_A = torch.nn.Parameter(torch.tensor(a, dtype=torch.float32))
        self.lora_B = torch.nn.Parameter(torch.tensor(b, dtype=torch.float32))
        self.scale = scale

    mask = None  # LoRA dropout: (N, in) factors of the batch's rows (0 or 1/(1-p)), given by --lora-dropout-masks

    def forward(self, x):
        a_in = x if self.mask is None else x * self.mask[ROW[0]:ROW[0] + x.shape[1]][None]
        return self.base(x) + self.scale * ((a_in @ self.lora_A.t()) @ self.lora_B.t())


def attach_lora(model, directory, dropout_masks=None):
    """Wraps every Linear layer a PEFT adapter directory (adapter_config.json + adapter_model.safetensors) targets
    and freezes everything else. Returns [(PEFT tensor name, parameter)] of the adapters, in file order."""
    with open(os.path.join(directory, "adapter_config.json")) as f:
        cfg = json.load(f)
    scale = float(cfg["lora_alpha"]) / float(cfg["r"])
    tensors = safetensors_io.read(os.path.join(directory, "adapter_model.safetensors"))
    for p in model.parameters():
        p.requires_grad_(False)
    named = []
    prefix = "base_model.model."
    for name in tensors:
        if not name.endswith(".lora_A.weight"):
            continue
        path = name[len(prefix):-len(".lora_A.weight")]  # model.layers.L.self_attn.q_proj
        parent_path, attr = path.rsplit(".", 1)
        parent = model.get_submodule(parent_path)
        wrapped = LoraLinear(getattr(parent, attr), tensors[name], tensors[name.replace("lora_A", "lora_B")], scale)
        if dropout_masks is not None:
            wrapped.mask = torch.tensor(dropout_masks[name], dtype=torch.float32)
        setattr(parent, attr, wrapped)
        named.append((name, wrapped.lora_A))
        named.append((name.replace("lora_A", "lora_B"), wrapped.lora_B))
    if not named:
        raise ValueError(f"{directory}: no lora_A tensors")
    return named


def use_interleaved_rope():
    """Negative control: swap in the GPT-J/Meta pairing (2i, 2i+1) for Hugging Face's rotate-half."""
    def rope_cos_sin(head_dim, theta, positions, dtype):
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        freqs = positions.float()[:, None] * inv_freq[None, :]
        emb = torch.repeat_interleave(freqs, 2, dim=-1)  # (T, D): elements 2i and 2i + 1 share a frequency
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def rotate_pairs(x):  # (..., D): (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...)
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)

    llama_model.rope_cos_sin = rope_cos_sin
    llama_model.rotate_half = rotate_pairs


def run_golden(args):
    if args.rope_convention == "interleaved":
        use_interleaved_rope()
    if args.qk_norm_placement == "after_rope":
        llama_model.QK_NORM_AFTER_ROPE = True
    model = llama_model.load_checkpoint(args.model)
    sequences, masks = load_batch(args.batch, model.config.vocab_size)
    if not args.temperature > 0:
        raise ValueError(f"--temperature {args.temperature}, expected > 0")
    masks_file = safetensors_io.read(args.lora_dropout_masks) if args.lora_dropout_masks else None
    trained = attach_lora(model, args.lora, masks_file) if args.lora else list(model.named_parameters())
    loss, logits, logp = batch_loss(model, sequences, masks, args.temperature)
    loss.backward()
    out = {"logits": logits, "logp": logp, "loss": loss.reshape(1)}
    for name, p in trained:
        out[f"grad.{name}"] = p.grad.clone()
    if args.adamw_steps > 0:
        model.zero_grad(set_to_none=True)
        opt = torch.optim.AdamW([p for _, p in trained], lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                                weight_decay=args.weight_decay, foreach=False)
        losses = []
        for _ in range(args.adamw_steps):
            opt.zero_grad(set_to_none=True)
            step_loss, _, _ = batch_loss(model, sequences, masks, args.temperature)
            losses.append(step_loss.item())
            step_loss.backward()
            opt.step()
        out["adamw_losses"] = torch.tensor(losses, dtype=torch.float32)
        for name, p in trained:
            out[f"final.{name}"] = p.detach().clone()
    safetensors_io.write(args.out, out, metadata={"producer": "tests/golden/torch_llama.py",
                                                  "torch": torch.__version__})
    print(f"wrote {args.out}: {logits.shape[0]} tokens, loss {loss.item():.6f}", file=sys.stderr)


def write_random_checkpoint(directory, config_json, seed):
    fields = json.loads(config_json)
    cfg = llama_model.LlamaConfig(**fields)
    model = llama_model.randomize_(llama_model.LlamaForCausalLM(cfg), seed)
    llama_model.save_checkpoint(model, directory)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {directory}: {n} parameters, seed {seed}", file=sys.stderr)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--model", help="checkpoint directory (config.json + model.safetensors)")
    mode.add_argument("--write-random-checkpoint", metavar="DIR", help="write a seeded random checkpoint")
    mode.add_argument("--selftest", action="store_true", help="check this reference against itself and exit")
    p.add_argument("--batch", help="BATCH.json with sequences and loss_mask")
    p.add_argument("--lora", metavar="ADAPTER_DIR",
                   help="a PEFT LoRA adapter directory: the model runs with it unmerged and only its tensors train")
    p.add_argument("--lora-dropout-masks", metavar="FILE",
                   help="with --lora: LoRA dropout, each adapter's input multiplied by FILE's tensor of its lora_A name "
                        "(rows of the batch's sequences in order, the dropout's 0 or 1/(1-p) factors)")
    p.add_argument("--out", help="output .safetensors path")
    p.add_argument("--adamw-steps", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--rope-convention", choices=["rotate_half", "interleaved"], default="rotate_half",
                   help="interleaved (GPT-J pairs 2i, 2i+1) is a negative control: rlcpp must NOT match it")
    p.add_argument("--qk-norm-placement", choices=["before_rope", "after_rope"], default="before_rope",
                   help="Qwen3's q_norm / k_norm; after_rope is a negative control: rlcpp must NOT match it")
    p.add_argument("--config", default="{}", help="JSON of LlamaConfig fields (with --write-random-checkpoint)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.model and not (args.batch and args.out):
        p.error("--model needs --batch and --out")
    if args.adamw_steps < 0:
        p.error(f"--adamw-steps {args.adamw_steps}, expected >= 0")
    return args


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)  # deterministic reductions, and the machines are shared
    if args.selftest:
        import golden_selftest
        return golden_selftest.run()
    if args.write_random_checkpoint:
        write_random_checkpoint(args.write_random_checkpoint, args.config, args.seed)
    else:
        run_golden(args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError) as e:
        print(f"torch_llama.py: error: {e}", file=sys.stderr)
        sys.exit(2)
