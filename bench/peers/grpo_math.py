"""The GRPO pieces the PyTorch peers share (torch_peer_work.py, torch_peer_grpo_run.py, hf_grpo_step.py): the
hashed stand-in reward of the timing peers and the group advantages.

Shapes: B samples, G samples per prompt (a prompt's samples adjacent)."""

import torch


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def hash_reward(sequence):
    """Deterministic stand-in for add3's reward (the peer measures time, not learning): a value of
    {0, 0.1, 1} picked by hashing the tokens, walked one by one in Python like a string check would be."""
    h = 0
    for t in sequence:
        h = splitmix64(h ^ t)
    return (0.0, 0.1, 1.0)[h % 3]


def grpo_advantages(rewards, group):
    """(B,) rewards of adjacent groups -> (B,) advantages (r - mean) / (std + 1e-6), 0 for a group whose
    rewards are all equal. std is torch's default (unbiased), as verl computes it."""
    r = rewards.view(-1, group)
    adv = (r - r.mean(dim=1, keepdim=True)) / (r.std(dim=1, keepdim=True) + 1e-6)
    same = (r == r[:, :1]).all(dim=1, keepdim=True)
    return torch.where(same, torch.zeros_like(adv), adv).view(-1)
