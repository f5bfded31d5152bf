"""How large a loss difference has to be before it means anything: a study-wide noise estimate.

Two estimates, in order of preference:

1. **seeds** - the pooled within-shape standard deviation of the final validation loss over seeds
   (each shape at its selected LR): s^2 = sum_i (n_i - 1) s_i^2 / sum_i (n_i - 1), the usual pooled
   variance of a one-way layout. The standard error of the difference of two shape means is
   s * sqrt(1/n_a + 1/n_b).
2. **eval-curve** - with one seed per shape there is no seed spread to measure. Instead, each run's
   last `TAIL` validation evaluations (at least `MIN_EVALS`) are fitted with a parabola in log(tokens),
   and the residual
   standard deviation (pooled over runs) is taken as the noise of one final loss; the difference of
   two runs then has standard error s * sqrt(2). This captures evaluation and late-training
   fluctuation but not the spread between initialisations, so it is a *lower bound* on seed noise:
   a difference it calls real may still be seed luck. The report says so.

A difference is called real when it exceeds `Z` standard errors (Z = 2, about a 95% two-sided level
for normal errors). With neither estimate the noise is unknown: the lowest loss is named, unverified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.serial import Serializable
from depthwidth.study.summary import ShapeResult

NOISE_METHODS = ("seeds", "eval-curve", "none")
TAIL = 6
MIN_EVALS = 5
Z = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class NoiseEstimate(Serializable):
    method: str  # "seeds" | "eval-curve" | "none"
    sigma: float | None  # standard deviation of one run's final loss
    dof: int  # degrees of freedom behind sigma
    description: str

    def __post_init__(self) -> None:
        if self.method not in NOISE_METHODS:
            raise UserError(f"method={self.method!r} is not allowed; expected one of {', '.join(NOISE_METHODS)}")
        if self.sigma is not None and not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise UserError(f"sigma={self.sigma!r} must be a finite number >= 0")

    def threshold(self, a: ShapeResult, b: ShapeResult, *, z: float = Z) -> float | None:
        """The loss difference between a and b that counts as real: z x its standard error."""
        if self.sigma is None:
            return None
        if self.method == "seeds":
            return z * self.sigma * math.sqrt(1 / max(a.n_seeds, 1) + 1 / max(b.n_seeds, 1))
        return z * self.sigma * math.sqrt(2)


def curve_tail_noise(tokens: Sequence[float], losses: Sequence[float], *, tail: int = TAIL) -> tuple[float, int] | None:
    """(residual sum of squares, degrees of freedom) of a least-squares parabola through the last `tail`
    finite validation losses against log(tokens); None with fewer than MIN_EVALS such points. A parabola,
    not a line, so the curvature of a loss that is still falling is not counted as noise (with 4
    evaluations of a short run a line's residuals are mostly that curvature)."""
    import numpy as np

    pts = [(math.log(t), v) for t, v in zip(tokens, losses)
           if t and t > 0 and v is not None and math.isfinite(v)][-tail:]
    if len(pts) < MIN_EVALS:
        return None
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    degree = 2
    x = x - x.mean()
    design = np.vander(x, degree + 1)  # (k, degree + 1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    rss = float(np.sum((y - design @ coef) ** 2))
    return rss, len(pts) - degree - 1


def estimate_noise(results: Sequence[ShapeResult]) -> NoiseEstimate:
    """The study-wide noise of one run's final loss (module docstring: methods and their limits)."""
    ss, dof = 0.0, 0
    for r in results:
        if r.n_seeds > 1:
            ss += (r.n_seeds - 1) * r.val_loss_std**2
            dof += r.n_seeds - 1
    if dof:
        sigma = math.sqrt(ss / dof)
        return NoiseEstimate(method="seeds", sigma=sigma, dof=dof, description=(
            f"seed noise: pooled standard deviation over seeds {sigma:.4f} ({dof} degrees of freedom); "
            f"a difference is real above {Z:g} standard errors of the difference"))
    ss, dof = 0.0, 0
    for r in results:
        for c in r.curves:
            tail = curve_tail_noise(c.tokens, c.val_loss)
            if tail is not None:
                ss += tail[0]
                dof += tail[1]
    if dof:
        sigma = math.sqrt(ss / dof)
        return NoiseEstimate(method="eval-curve", sigma=sigma, dof=dof, description=(
            f"one seed per shape: noise estimated from the scatter of the last {TAIL} validation evaluations "
            f"around a trend, {sigma:.4f} ({dof} degrees of freedom); this is a lower bound on seed noise - "
            "run more seeds to know"))
    return NoiseEstimate(method="none", sigma=None, dof=0, description=(
        f"no noise estimate: one seed per shape and fewer than {MIN_EVALS} validation evaluations per run; "
        "whether a loss difference is real cannot be judged (run 2 or more seeds, or evaluate more often)"))


__all__ = ["MIN_EVALS", "NoiseEstimate", "NOISE_METHODS", "Z", "curve_tail_noise", "estimate_noise"]
