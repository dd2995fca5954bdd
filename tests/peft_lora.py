#!/usr/bin/env python3
"""rlcpp's LoRA adapters against Hugging Face's peft (tests/trainer_lora_test.cpp).

  peft_lora.py --base DIR --ours DIR --theirs DIR --tokens '[ids]' --out OUT.safetensors

Opens rlcpp's adapter directory (--ours) over the base checkpoint with PeftModel.from_pretrained and writes the
logits of the tokens as ours_logits; then makes adapters of its own over the same base (rank 8, alpha 32,
q_proj, v_proj and up_proj, B drawn nonzero so that they change the model), saves them with save_pretrained into
--theirs and writes their logits as theirs_logits. All fp32, eval mode (no dropout).
"""
import argparse
import json

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM


def main():
    p = argparse.ArgumentParser()
    for flag in ("--base", "--ours", "--theirs", "--tokens", "--out"):
        p.add_argument(flag, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    tokens = torch.tensor([json.loads(args.tokens)], dtype=torch.int64)
    with torch.no_grad():
        base = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32)
        ours = PeftModel.from_pretrained(base, args.ours).eval()
        ours_logits = ours(tokens).logits[0].contiguous()

        base = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32)
        config = LoraConfig(r=8, lora_alpha=32, target_modules=["q_proj", "v_proj", "up_proj"], lora_dropout=0.0,
                            task_type="CAUSAL_LM")
        theirs = get_peft_model(base, config)
        generator = torch.Generator().manual_seed(0)
        for name, param in theirs.named_parameters():
            if "lora_B" in name:
                param.copy_(0.05 * torch.randn(param.shape, generator=generator))
        theirs.eval()
        theirs_logits = theirs(tokens).logits[0].contiguous()
        theirs.save_pretrained(args.theirs)
    save_file({"ours_logits": ours_logits, "theirs_logits": theirs_logits}, args.out)


if __name__ == "__main__":
    main()
