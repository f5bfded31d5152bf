"""The optimizer of a run: its parameter groups (which tensors decay) and AdamW built from them.
Every per-parameter setting of a run is decided here, in one place."""

from __future__ import annotations

import torch

from depthwidth.train.config import TrainConfig

#: Parameters whose names end like this are embeddings (not decayed unless decay_embeddings).
EMBEDDING_PARAMS = ("embed.weight", "pos_embed.weight")


def param_groups(model: torch.nn.Module, config: TrainConfig) -> list[dict]:
    """Matrices decay; norms, biases (1-D) and embeddings (unless decay_embeddings) do not."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_embedding = name in EMBEDDING_PARAMS
        (decay if p.dim() >= 2 and (config.decay_embeddings or not is_embedding) else no_decay).append(p)
    return [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(param_groups(model, config), lr=config.lr, betas=(config.beta1, config.beta2),
                             eps=config.eps, foreach=True)
