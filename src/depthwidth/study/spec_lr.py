"""`[lr]` of a study spec: which learning rates each shape tries and how they are chosen.

`grid = [...]` (the same values for every shape) or a grid centred per width (`centre`, `reference_width`,
`exponent`, `factors`: lr = centre * factor * (reference_width / d_model) ** exponent, muP-style 1/width
scaling with exponent 1, Yang et al. 2022, "Tensor Programs V", Table 3, hidden-weight Adam LR);
`search = "bracket"` with `max_trials` (and `step`) brackets each shape's optimum within the same budget
(`depthwidth.study.lr_search`); `transfer_from` tunes one shape and reuses its LR under mup/completep;
`verify = 2 | 4` checks that transfer at the largest scale and `verify = "adapt"` also re-tunes every shape
of a group whose check failed, within `adapt_trials` extra learning rates each (`depthwidth.study.verify`).
Re-exported by `depthwidth.study.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.shape import LIMITS as SHAPE_LIMITS
from depthwidth.study.limits import LIMITS, LR, bounded, bounded_number, listed
from depthwidth.study.lr_search import SEARCHES
from depthwidth.study.schema import SpecError, checked, choice, integer, integer_or, number, optional, text
from depthwidth.study.spec_budget import NAME_PATTERN
from depthwidth.study.verify import ADAPT, ADAPT_LIMIT, ADAPT_TRIALS, VERIFY_COUNTS

_WIDTH = bounded(SHAPE_LIMITS, "d_model")
_VERIFY_WORDS = f"{', '.join(map(str, VERIFY_COUNTS[:-1]))}, {VERIFY_COUNTS[-1]} or {ADAPT!r}"


@dataclass(frozen=True, kw_only=True, slots=True)
class LRSpec:
    grid: tuple[float, ...] | None = checked(optional(listed(LR, "lrs")), None)
    centre: float | None = checked(optional(LR), None, doc="LR at reference_width")
    reference_width: int | None = checked(optional(_WIDTH), None)
    exponent: float = checked(number(0.0, inclusive=True, maximum=4.0, why="muP's Adam learning rate scales as "
                                     "width**-1"), 1.0, doc="lr ~ width**-exponent")
    factors: tuple[float, ...] = checked(listed(bounded_number("lr_factor"), "lrs"), (0.5, 1.0, 2.0))
    search: str = checked(choice(SEARCHES), "grid",
                          doc="grid: the values above; bracket: start there, extend and refine (lr_search)")
    max_trials: int | None = checked(optional(bounded(LIMITS, "lrs")), None, doc="bracket: LRs per shape, every shape")
    step: float | None = checked(optional(bounded_number("lr_step", minimum=1.0)), None,
                                 doc="bracket: extension ratio (default: the grid's)")
    transfer_from: str | None = checked(optional(text(NAME_PATTERN, what="a shape label or 'smallest'")), None,
                                        doc="tune this shape only, reuse its LR (mup/completep groups)")
    transfer_seeds: int | None = checked(optional(integer(1, 64)), None,
                                         doc="transfer: seeds per shape at the reused LR (default: the saved trials)")
    verify: int | str = checked(integer_or(integer(0, max(VERIFY_COUNTS)), (ADAPT,), what=_VERIFY_WORDS), 0,
                                doc="transfer: extra LRs (2 or 4) at the largest scale's shallowest and deepest shape, "
                                    "to see whether the optimum moved; 'adapt': the check of 2, then a re-tune of "
                                    "every shape of a group where it moved (study.verify)")
    adapt_trials: int | None = checked(optional(integer(1, ADAPT_LIMIT[0], why=ADAPT_LIMIT[1])), None,
                                       doc=f"verify = 'adapt': extra LRs per re-tuned shape (default {ADAPT_TRIALS})")

    def __post_init__(self) -> None:
        if (self.grid is None) == (self.centre is None):
            raise UserError("give either grid = [...] or centre (with reference_width and factors)")
        if self.centre is not None and self.reference_width is None:
            raise UserError("a centred grid needs reference_width")
        if self.search == "bracket":
            if self.max_trials is None:
                raise UserError("search = \"bracket\" needs max_trials (the learning rates every shape may try)")
            if self.max_trials < self.trials:
                raise UserError(f"max_trials={self.max_trials} is below the {self.trials} starting learning rates")
        else:
            for name in ("max_trials", "step"):
                if getattr(self, name) is not None:
                    raise UserError(f"{name} is a setting of search = \"bracket\"")
        if self.transfer_seeds is not None and self.transfer_from is None:
            raise UserError("transfer_seeds needs transfer_from")
        if self.verify != ADAPT and self.verify not in VERIFY_COUNTS:
            raise SpecError(f"verify={self.verify}: give 0, 2 or 4 (learning rates below and above the transferred "
                            f"one in equal numbers), or {ADAPT!r} (the check of 2, then a re-tune where it fails)",
                            key="lr.verify")
        if self.verify and self.transfer_from is None:
            raise SpecError("verify checks a transferred learning rate: it needs transfer_from", key="lr.verify")
        if self.adapt_trials is not None and self.verify != ADAPT:
            raise SpecError(f"adapt_trials is a setting of verify = {ADAPT!r} (the extra learning rates a re-tuned "
                            f"shape may try); this spec has verify = {self.verify!r}", key="lr.adapt_trials")

    @property
    def trials(self) -> int:
        return len(self.grid) if self.grid is not None else len(self.factors)

    @property
    def adapts(self) -> bool:
        """`verify = "adapt"`: a failed transfer check re-tunes the group (`depthwidth.study.verify`)."""
        return self.verify == ADAPT

    @property
    def verify_count(self) -> int:
        """The verification learning rates per checked shape: `verify`, or 2 for "adapt"."""
        return 2 if self.adapts else int(self.verify)

    @property
    def extra_trials(self) -> int:
        """`verify = "adapt"`: the extra learning rates a re-tuned shape may try (0 without adapt)."""
        if not self.adapts:
            return 0
        return self.adapt_trials if self.adapt_trials is not None else ADAPT_TRIALS

    def values(self, d_model: int) -> tuple[float, ...]:
        """The learning rates tried for a shape of width d_model, ascending."""
        if self.grid is not None:
            return tuple(sorted(self.grid))
        scale = self.centre * (self.reference_width / d_model) ** self.exponent
        return tuple(sorted(float(f"{scale * f:.6g}") for f in self.factors))


__all__ = ["LRSpec"]
