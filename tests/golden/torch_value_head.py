#!/usr/bin/python3
"""Golden reference for rlcpp's critic: loads an rlcpp value-head checkpoint (Hugging Face
LlamaForTokenClassification / Qwen2ForTokenClassification with num_labels 1), runs it in fp32 with the body of
llama_model.py and HF's head, score = nn.Linear(hidden, 1) on the final-norm output (dropout is inactive in
eval), and writes the values and the gradient of L = sum_t dvalue[t] * value[t] for every parameter.

  torch_value_head.py --model DIR --batch BATCH.json --out OUT.safetensors

BATCH.json = {"sequences": [[ids...], ...], "dvalue": [[one float per token], ...]}; each sequence runs on its
own from position 0. OUT.safetensors (F32): values (N,), loss (1,), grad.<name> for every parameter; N = total
tokens, sequences concatenated in order.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import llama_model  # noqa: E402
import safetensors_io  # noqa: E402

_HEAD_KEYS = {"num_labels", "id2label", "label2id"}


class TokenClassifier(nn.Module):
    """HF's *ForTokenClassification: `model.` body and a `score` Linear with bias."""

    def __init__(self, cfg, num_labels):
        super().__init__()
        self.config = cfg
        self.model = llama_model.Backbone(cfg)
        self.score = nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, tokens):  # (B, T) -> (B, T, num_labels)
        x = self.model.embed_tokens(tokens)
        positions = torch.arange(tokens.shape[1])
        cos, sin = llama_model.rope_cos_sin(self.config.head_dim, self.config.rope_theta, positions, x.dtype)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, None, i, 0)
        return self.score(self.model.norm(x))


def load(directory):
    config_path = os.path.join(directory, "config.json")
    with open(config_path) as f:
        j = json.load(f)
    arch = j.get("architectures", [""])[0]
    if not arch.endswith("ForTokenClassification"):
        raise ValueError(f"{config_path}: architectures {j.get('architectures')}, expected *ForTokenClassification")
    num_labels = len(j["id2label"]) if "id2label" in j else j.get("num_labels", 2)
    if num_labels != 1:
        raise ValueError(f"{config_path}: num_labels {num_labels}, expected 1 (a critic)")
    cfg = llama_model.LlamaConfig.from_hf_json({k: v for k, v in j.items() if k not in _HEAD_KEYS}, config_path)
    model = TokenClassifier(cfg, num_labels)
    weights_path = os.path.join(directory, "model.safetensors")
    tensors = safetensors_io.read(weights_path)
    params = dict(model.named_parameters())
    if set(params) != set(tensors):
        raise ValueError(f"{weights_path}: tensors differ from the model's: missing "
                         f"{sorted(set(params) - set(tensors))}, unexpected {sorted(set(tensors) - set(params))}")
    with torch.no_grad():
        for name, p in params.items():
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise ValueError(f"{weights_path}: '{name}' has shape {list(tensors[name].shape)}, "
                                 f"expected {list(p.shape)}")
            p.copy_(torch.from_numpy(tensors[name]))
    return model


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model = load(args.model).eval()
    with open(args.batch) as f:
        batch = json.load(f)
    values, losses = [], []
    for seq, dv in zip(batch["sequences"], batch["dvalue"], strict=True):
        if len(seq) != len(dv):
            raise ValueError(f"{args.batch}: a sequence of {len(seq)} tokens has {len(dv)} dvalue entries")
        v = model(torch.tensor(seq, dtype=torch.int64)[None, :])[0, :, 0]  # (T,)
        values.append(v)
        losses.append((v * torch.tensor(dv, dtype=torch.float32)).sum())
    loss = torch.stack(losses).sum()
    loss.backward()
    out = {"values": torch.cat(values).detach(), "loss": loss.detach().reshape(1)}
    for name, param in model.named_parameters():
        out[f"grad.{name}"] = param.grad.clone()
    safetensors_io.write(args.out, out, metadata={"producer": "tests/golden/torch_value_head.py",
                                                  "torch": torch.__version__})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError, KeyError) as e:
        print(f"torch_value_head.py: error: {e}", file=sys.stderr)
        sys.exit(2)
