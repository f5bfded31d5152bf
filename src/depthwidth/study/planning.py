"""A [[budget]] table -> the shapes of its family, through the planner
(`depthwidth.shapes.families.plan_family`); the study only chooses the conventions (the spec's [model]
table and the tokenizer's vocabulary) and the token budget that every member trains on.

Token budget of a compute budget: `tokens` when given; with `tokens_per_param` r, every member trains on
the median of the members' r * N (each member's N is within the tolerance of the others), so that the
members see the same tokens - the fairness rule of a study - and their compute differs by at most the
tolerance.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from depthwidth.shapes.families import plan_family
from depthwidth.shapes.shape import Shape
from depthwidth.study.spec import BudgetSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned:
    label: str
    shapes: tuple[Shape, ...]
    tokens: int | None  # fixed by a compute budget; None: the [train] budget applies
    target: dict
    notes: tuple[str, ...]


def plan_budget(budget: BudgetSpec, *, base: dict, seq_len: int) -> Planned:
    """ValueError (from the planner) when no shape meets the budget."""
    template = Shape(n_layers=1, d_model=budget.head_dim, n_heads=1, **base)
    family = plan_family(
        base=template, params=budget.params, non_embedding=budget.non_embedding, train_flops=budget.flops,
        tokens=budget.tokens, tokens_per_param=budget.tokens_per_param, seq_len=seq_len, count=budget.count,
        align=budget.align, head_dim=budget.head_dim, depths=budget.depths, widths=budget.widths,
        tolerance=budget.tolerance, min_layers=budget.min_layers,
        aspect_range=(budget.aspect_min, budget.aspect_max),
    )
    tokens = None
    if budget.flops is not None:
        tokens = budget.tokens or round(statistics.median(m.tokens for m in family.members))
    shapes = tuple(m.shape for m in sorted(family.members, key=lambda m: -m.shape.n_layers))
    notes = tuple(family.notes) + tuple(d.reason for d in family.dropped)
    target = {"kind": family.kind, "target": family.target, "target_name": family.target_name,
              "tolerance": family.tolerance, "members": [m.to_dict() for m in family.members]}
    return Planned(label=budget.label or budget.default_label(), shapes=shapes, tokens=tokens, target=target,
                   notes=notes)


__all__ = ["Planned", "plan_budget"]
