"""Held-out score and model selection of the shape-aware laws (`report.fit_shape`).

Held-out score (`held_out`): repeated random splits of the distinct configurations (width, depth,
tokens; the seeds of a configuration stay together, so a held-out point is a configuration the fit has
not seen) into fitted and held-out parts, 80/20 by default; the score is the mean relative absolute error
|L_hat - L| / L on the held-out points, as Liu et al. 2026 validate their law (appendix B, random 80/20
splits). `select_form` scores every form on the same splits and says which one the data support: the
lowest mean error, "supported" when its lead over the runner-up, paired split by split, exceeds two
standard errors of the mean difference. Pure functions of the points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.report.fit_shape import FORMS, LawPoint, ShapeLawFit, fit_shape_law, relative_error as _relative_error
from depthwidth.serial import Serializable, hook


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldOut(Serializable):
    """Mean relative absolute error on held-out configurations over repeated random splits."""

    form: str
    mean_error: float | None  # None when no split could be fitted
    split_errors: tuple[float | None, ...]  # per split (None: too few points left to fit)
    test_fraction: float
    in_sample_error: float | None = None
    fit: ShapeLawFit | None = field(default=None, repr=False, metadata=hook(skip=True))  # on every point, no bootstrap


def _splits(points: Sequence[LawPoint], *, n_splits: int, test_fraction: float, seed: int):
    import numpy as np

    configs = sorted({p.config for p in points})
    if len(configs) < 2:
        raise UserError(f"{len(configs)} distinct configuration(s) (width, depth, tokens): nothing to hold out")
    n_test = max(1, round(test_fraction * len(configs)))
    rng = np.random.default_rng(seed)
    for _ in range(n_splits):
        held = {configs[i] for i in rng.permutation(len(configs))[:n_test]}
        yield ([p for p in points if p.config not in held], [p for p in points if p.config in held])


def held_out(points: Sequence[LawPoint], *, form: str, n_splits: int = 20, test_fraction: float = 0.2,
             seed: int = 0) -> HeldOut:
    """`form`'s held-out error over `n_splits` random splits of the configurations (module docstring)."""
    if not 0 < test_fraction < 1:
        raise UserError(f"test_fraction={test_fraction!r} must lie in (0, 1)")
    if n_splits < 1:
        raise UserError(f"n_splits={n_splits!r} must be >= 1")
    errors: list[float | None] = []
    try:
        full = fit_shape_law(points, form=form, n_bootstrap=0)
    except UserError:
        full = None
    for train, test in _splits(points, n_splits=n_splits, test_fraction=test_fraction, seed=seed):
        try:
            fit = fit_shape_law(train, form=form, n_bootstrap=0, init=full)
        except UserError:
            errors.append(None)
            continue
        errors.append(_relative_error(fit, test))
    done = [e for e in errors if e is not None]
    return HeldOut(form=form, mean_error=sum(done) / len(done) if done else None, split_errors=tuple(errors),
                   test_fraction=test_fraction, in_sample_error=None if full is None else full.in_sample_error,
                   fit=full)


@dataclass(frozen=True, kw_only=True, slots=True)
class FormSelection(Serializable):
    scores: tuple[HeldOut, ...]  # sorted, lowest held-out error first
    best: str | None
    supported: bool  # the best beats the runner-up on the paired splits by more than 2 standard errors
    line: str


def select_form(points: Sequence[LawPoint], *, forms: Sequence[str] = FORMS, n_splits: int = 20,
                test_fraction: float = 0.2, seed: int = 0) -> FormSelection:
    """Each form's held-out error on the same splits, and which form the data support (the lowest error,
    "supported" when its paired lead over the runner-up exceeds two standard errors)."""
    scores = [held_out(points, form=f, n_splits=n_splits, test_fraction=test_fraction, seed=seed) for f in forms]
    scores.sort(key=lambda s: math.inf if s.mean_error is None else s.mean_error)
    done = [s for s in scores if s.mean_error is not None]
    listing = ", ".join(f"{s.form} {_pct(s.mean_error)}" for s in scores)
    head = (f"held-out error (mean |L_hat - L| / L over {n_splits} random {1 - test_fraction:.0%}/{test_fraction:.0%} "
            f"splits of {len({p.config for p in points})} configurations): {listing}")
    if not done:
        return FormSelection(scores=tuple(scores), best=None, supported=False,
                             line=head + "; no form could be fitted on the splits")
    best = done[0]
    if len(done) == 1:
        return FormSelection(scores=tuple(scores), best=best.form, supported=False,
                             line=head + f"; only {best.form} could be fitted")
    other = done[1]
    pairs = [(a, b) for a, b in zip(best.split_errors, other.split_errors) if a is not None and b is not None]
    diffs = [b - a for a, b in pairs]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else math.inf
    se = sd / math.sqrt(len(diffs))
    wins = sum(d > 0 for d in diffs)
    supported = se > 0 and mean > 2 * se
    lead = (f"lower held-out error than {other.form} on {wins} of {len(diffs)} splits, by {_pct(mean)} "
            f"on average ({mean / se:.1f} standard errors)" if se > 0 else f"the same error as {other.form}")
    verdict = (f"; the data support {best.form}: {lead}" if supported
               else f"; the data do not separate {best.form} from {other.form}: {lead}")
    return FormSelection(scores=tuple(scores), best=best.form, supported=supported, line=head + verdict)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"



__all__ = ["FormSelection", "HeldOut", "held_out", "select_form"]
