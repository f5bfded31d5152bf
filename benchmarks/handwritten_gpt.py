"""A plain GPT-2 written out by hand: the reference model of bench_train.py and profile_train_step.py.

GPT-2 conventions (Radford et al. 2019; nanoGPT's model.py): learned positions, pre-norm LayerNorm blocks with
biases, one fused qkv Linear, causal `scaled_dot_product_attention`, a tanh-GELU MLP of 4 x d_model, a final
LayerNorm, the head tied to the token embedding, normal(0.02) init with the residual output projections at
0.02 / sqrt(2 L). No dropout, no options: the model a user writes for this one shape. Its parameters are listed
in the order of `depthwidth.model.Transformer`'s (`from_ours` copies that model's weights in).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, eps: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln_1 = nn.LayerNorm(d_model, eps=eps)
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.ln_2 = nn.LayerNorm(d_model, eps=eps)
        self.c_fc = nn.Linear(d_model, d_ff)
        self.mlp_proj = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D)
        B, T, D = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)  # (B, T, D) each
        q = q.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)  # (B, H, T, Dh)
        k = k.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, *, n_layers: int, d_model: int, n_heads: int, vocab_size: int, max_seq_len: int,
                 d_ff: int | None = None, eps: float = 1e-5) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_seq_len, d_model)
        self.h = nn.ModuleList(Block(d_model, n_heads, d_ff or 4 * d_model, eps) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model, eps=eps)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):  # idx, targets: (B, T)
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))  # (B, T, D)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


#: our Transformer's parameter names, per block, -> this model's
OURS = {"norm1": "ln_1", "attn.qkv": "c_attn", "attn.out": "c_proj", "norm2": "ln_2", "mlp.up": "c_fc",
        "mlp.down": "mlp_proj"}


def from_ours(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A `depthwidth.model.Transformer` state dict (a GPT-2-style shape) under this model's names."""
    out = {}
    for name, t in state.items():
        if name.startswith("blocks."):
            _, i, rest = name.split(".", 2)
            module, kind = rest.rsplit(".", 1)
            out[f"h.{i}.{OURS[module]}.{kind}"] = t
        else:
            out[{"embed.weight": "wte.weight", "pos_embed.weight": "wpe.weight", "final_norm.weight": "ln_f.weight",
                 "final_norm.bias": "ln_f.bias"}[name]] = t
    return out
