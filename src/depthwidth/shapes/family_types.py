"""The results of `depthwidth.shapes.families.plan_family`: a `Family` of `FamilyMember`s and the
`DroppedShape`s it left out, with the reasons. Standard library only; the dict forms are `depthwidth.serial`'s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from depthwidth.serial import Serializable, hook
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyMember:
    """One shape of a family. `error` = (value - target) / target of the budgeted quantity."""

    shape: Shape
    value: float
    error: float
    params: int
    non_embedding_params: int
    exact_depth: float  # continuous solution of the budget equation at this width
    tokens: float | None = None  # iso-compute: training tokens
    train_flops: float | None = None  # iso-compute: training FLOPs of the member
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.shape.label(), "n_layers": self.shape.n_layers, "d_model": self.shape.d_model,
            "aspect_ratio": self.shape.aspect_ratio, "value": self.value, "error": self.error,
            "params": self.params, "non_embedding_params": self.non_embedding_params,
            "exact_depth": self.exact_depth, "tokens": self.tokens, "train_flops": self.train_flops,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class DroppedShape(Serializable):
    """A candidate left out of the family, and why."""

    n_layers: int | None
    d_model: int | None
    error: float | None
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Family(Serializable):
    """The members of one budget, with how they were searched. In the dict form the budget's settings
    come first (the depth span after seq_len), then the members, the dropped shapes and the notes;
    `base` is left out (each member carries its whole shape)."""

    kind: str  # "iso-params" | "iso-compute"
    target: float
    target_name: str  # "params" | "non_embedding_params" | "train_flops"
    tolerance: float
    align: int
    head_dim: int
    seq_len: int = field(metadata=hook(followed_by=("depth_span",)))
    reference_params: float | None = None  # iso-compute: N with C = 6 N D alone
    base: Shape | None = field(default=None, metadata=hook(skip=True))
    non_embedding: bool = False
    tokens: float | None = None  # iso-compute with a fixed token count
    tokens_per_param: float | None = None  # iso-compute with a tokens-per-parameter ratio
    members: tuple[FamilyMember, ...]
    dropped: tuple[DroppedShape, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def depth_span(self) -> float:
        depths = [m.shape.n_layers for m in self.members]
        return max(depths) / min(depths) if depths else 0.0


def human(value: float) -> str:
    """124439808 -> '124.4M', 1e19 -> '1e+19' (for messages)."""
    if value >= 1e15:
        return f"{value:.3g}"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.4g}{unit}"
    return f"{value:.4g}"
