"""A study spec's [[budget]] table: one target that the planner expands into a family of shapes
(`depthwidth.study.planning`). A parameter budget trains every member on the [train] tokens; a compute
budget fixes the tokens (given, or r tokens per parameter); an equal-time budget (`seconds` or
`gpu_hours`, predicted on `hardware`) gives each member the tokens it trains in that time
(`depthwidth.study.timebudget`)."""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_one_budget
from depthwidth.shapes.shape import LIMITS as SHAPE_LIMITS
from depthwidth.study.limits import bounded, listed
from depthwidth.shapes.parametrization import PARAMETRIZATIONS
from depthwidth.study.schema import boolean, checked, choice, integer, number, optional, text

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
MAX_SECONDS = 3.2e10  # an equal-time budget: at most about a thousand device-years

_DEPTH, _WIDTH = bounded(SHAPE_LIMITS, "n_layers"), bounded(SHAPE_LIMITS, "d_model")


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetSpec:
    """One target, expanded into a family of shapes by `depthwidth.shapes.families.plan_family`."""

    params: int | None = checked(optional(integer(1)), None, doc="parameter target")
    non_embedding: bool = checked(boolean, True, doc="params (and N in tokens_per_param) are non-embedding")
    flops: float | None = checked(optional(number(0.0)), None, doc="training-compute target (FLOPs)")
    tokens: int | None = checked(optional(integer(1)), None, doc="with flops: training tokens")
    tokens_per_param: float | None = checked(optional(number(0.0)), None, doc="with flops: D = r * N")
    count: int = checked(integer(1, 16), 5, doc="family members")
    depths: tuple[int, ...] | None = checked(optional(listed(_DEPTH, "family")), None)
    widths: tuple[int, ...] | None = checked(optional(listed(_WIDTH, "family")), None)
    align: int = checked(_WIDTH, 8, doc="widths are multiples of lcm(align, head_dim)")
    head_dim: int = checked(bounded(SHAPE_LIMITS, "head_dim"), 8)
    tolerance: float = checked(number(0.0, maximum=0.99), 0.05)
    min_layers: int = checked(_DEPTH, 2)
    aspect_min: float = checked(number(0.0), 4.0, doc="lowest d_model / n_layers")
    aspect_max: float = checked(number(0.0), 512.0, doc="highest d_model / n_layers")
    label: str | None = checked(optional(text(NAME_PATTERN, what="a short label")), None)
    seconds: float | None = checked(optional(number(0.0, maximum=MAX_SECONDS)), None,
                                    doc="with params: every member trains for this predicted time")
    gpu_hours: float | None = checked(optional(number(0.0, maximum=MAX_SECONDS / 3600)), None,
                                      doc="seconds / 3600 on one device")
    hardware: str | None = checked(optional(text(what="a hardware name or 'measured'")), None,
                                   doc="where `seconds` are predicted (default: the study's hardware)")
    parametrization: str | None = checked(optional(choice(PARAMETRIZATIONS)), None,
                                          doc="this budget's runs under it instead of [train]'s")

    def __post_init__(self) -> None:
        check_one_budget(params=self.params, flops=self.flops, tokens=self.tokens,
                         tokens_per_param=self.tokens_per_param)  # a params budget's tokens come from [train]
        if self.seconds is not None and self.gpu_hours is not None:
            raise UserError("give seconds or gpu_hours, not both")
        if self.time_seconds is not None and self.params is None:
            raise UserError("an equal-time budget (seconds or gpu_hours) plans its shapes by params: give params, "
                            "not flops")
        if self.hardware is not None and self.time_seconds is None:
            raise UserError("hardware names where an equal-time budget's seconds are predicted: give seconds or "
                            "gpu_hours with it")
        if self.depths is not None and self.widths is not None:
            raise UserError("give depths or widths, not both")
        if not self.aspect_min < self.aspect_max:
            raise UserError(f"aspect_min={self.aspect_min:g} must be below aspect_max={self.aspect_max:g}")

    @property
    def time_seconds(self) -> float | None:
        """The equal-time budget in seconds (`seconds`, or `gpu_hours` x 3600); None for another budget."""
        return self.seconds if self.gpu_hours is None else self.gpu_hours * 3600.0

    def default_label(self) -> str:
        from depthwidth.shapes.families import human

        if self.params is not None and self.time_seconds is not None:
            t = self.time_seconds
            when = f"{t / 3600:g}h" if t >= 3600 else f"{t:g}s"
            return f"{'N' if self.non_embedding else 'P'}{human(self.params)}-{when}"
        if self.params is not None:
            return f"{'N' if self.non_embedding else 'P'}{human(self.params)}"
        return f"C{self.flops:.3g}"


__all__ = ["MAX_SECONDS", "NAME_PATTERN", "BudgetSpec"]
