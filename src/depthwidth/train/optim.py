"""The optimizer of a run: its parameter groups (which tensors decay, and each tensor's learning-rate,
weight-decay and eps factors under the run's parametrization) and AdamW built from them. Every
per-parameter setting of a run is decided here, in one place.

Each group carries `lr_scale`: the trainer sets `group["lr"] = lr_at(step) * group["lr_scale"]`. Under SP
every factor is 1 and the groups are the two they always were (decayed matrices, then the rest, in module
order), so SP runs are bit-identical to runs before parametrizations existed.
"""

from __future__ import annotations

import torch

from depthwidth.artifact.config import TrainConfig
from depthwidth.shapes.parametrization import Multipliers

#: Parameters whose names end like this are embeddings (not decayed unless decay_embeddings).
EMBEDDING_PARAMS = ("embed.weight", "pos_embed.weight")


def param_role(name: str, p: torch.nn.Parameter) -> str:
    """Which `depthwidth.shapes.parametrization.ROLES` group a parameter of `Transformer` belongs to."""
    if name in EMBEDDING_PARAMS:
        return "embedding"
    if name.startswith("blocks."):
        return "hidden" if p.dim() >= 2 else "hidden_vector"
    if name.startswith("final_norm."):
        return "final_norm"
    return "head"


def param_groups(model: torch.nn.Module, config: TrainConfig) -> list[dict]:
    """Matrices decay; norms, biases (1-D) and embeddings (unless decay_embeddings) do not. Tensors sharing
    (decay, LR factor, decay factor, eps factor, DTensor or not) share a group; decayed groups come first, each
    group's tensors in module order (a tensor-parallel model mixes DTensor and plain parameters, and one fused
    AdamW call takes one kind). The factors are the model's `scaling` (all 1 under SP)."""
    scaling: Multipliers | None = getattr(model, "scaling", None)
    keyed: dict[tuple, dict] = {}
    for name, p in model.named_parameters():
        role = param_role(name, p)
        decays = p.dim() >= 2 and (config.decay_embeddings or role != "embedding")
        lr_scale = scaling.lr[role] if scaling is not None else 1.0
        wd = config.weight_decay * (scaling.weight_decay[role] if scaling is not None else 1.0) if decays else 0.0
        eps = config.eps * (scaling.eps if scaling is not None else 1.0)
        # a tensor-parallel model mixes DTensor and plain parameters; one fused AdamW call takes one kind
        key = (not decays, lr_scale, wd, eps, hasattr(p, "device_mesh"))
        group = keyed.setdefault(key, {"params": [], "weight_decay": wd, "lr_scale": lr_scale, "eps": eps,
                                       "lr": config.lr * lr_scale, "roles": []})
        group["params"].append(p)
        if role not in group["roles"]:
            group["roles"].append(role)
    return [keyed[k] for k in sorted(keyed, key=lambda k: k[0])]  # stable: decayed first, then first seen


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW over `param_groups`, in the implementation `config.adamw` names (part of the run's identity)."""
    kernel = {"fused": True} if config.adamw == "fused" else {"foreach": True}
    return torch.optim.AdamW(param_groups(model, config), lr=config.lr, betas=(config.beta1, config.beta2),
                             eps=config.eps, **kernel)
