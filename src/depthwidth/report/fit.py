"""Scaling-law fits with bootstrap uncertainty: L(N) = E + A/N^alpha and L(N, D) = E + A/N^alpha + B/D^beta.

Method (Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", approach 3, and
appendix D.2): parametrise E = exp(e), A = exp(a), B = exp(b) so every term stays positive, write the
predicted log-loss as a log-sum-exp

    log L_hat = LSE(a - alpha log N, b - beta log D, e)

and minimise the summed Huber loss (delta = 1e-3) of the residuals log L_hat - log L_obs with L-BFGS-B,
started from every point of a grid and keeping the best optimum (the objective is not convex).

Uncertainty: a nonparametric bootstrap (Efron & Tibshirani 1993, ch. 13): resample the points with
replacement, refit, and take percentile intervals of each parameter and of each prediction. The
intervals describe the spread of the fit over the measured points; they cannot see a systematic
departure from the assumed functional form, so an extrapolation far beyond the data stays a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.serial import Serializable

HUBER_DELTA = 1e-3
#: alpha, beta kept in this range; (e, a, b) in [-LOG_BOUND, LOG_BOUND].
EXPONENT_BOUNDS = (1e-3, 4.0)
LOG_BOUND = 40.0
MIN_DISTINCT_N = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class Interval(Serializable):
    """A point estimate with a percentile interval (lo, hi) at `level`."""

    value: float
    lo: float
    hi: float
    level: float

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise UserError(f"level={self.level!r} must lie in (0, 1)")

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def overlaps(self, other: "Interval") -> bool:
        return self.lo <= other.hi and other.lo <= self.hi


@dataclass(frozen=True, kw_only=True, slots=True)
class PowerLawFit:
    """A fitted L(N) (B = beta = None) or L(N, D), with bootstrap intervals.

    `samples` holds the bootstrap refits as (E, A, alpha, B, beta) tuples (B, beta NaN for L(N)),
    so predictions can carry the same uncertainty as the parameters.
    """

    E: float
    A: float
    alpha: float
    B: float | None
    beta: float | None
    n_points: int
    distinct_n: int
    distinct_d: int
    n_range: tuple[float, float]
    objective: float
    intervals: dict[str, Interval]
    samples: tuple[tuple[float, float, float, float, float], ...] = field(repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def joint(self) -> bool:
        return self.B is not None

    def predict(self, n: float, d: float | None = None) -> float:
        """The fitted loss at N (and D for a joint fit)."""
        return _law(self.E, self.A, self.alpha, self.B, self.beta, n, d)

    def predict_interval(self, n: float, d: float | None = None, *, level: float = 0.95) -> Interval:
        """Prediction with a bootstrap percentile band at `level`."""
        import numpy as np

        if self.joint and d is None:
            raise UserError("d=None: a joint L(N, D) fit needs the token count D to predict")
        values = np.array([_law(E, A, al, None if self.B is None else B, be, n, d) for E, A, al, B, be in self.samples])
        values = values[np.isfinite(values)]
        if values.size == 0:
            point = self.predict(n, d)
            return Interval(value=point, lo=point, hi=point, level=level)
        lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
        return Interval(value=self.predict(n, d), lo=float(lo), hi=float(hi), level=level)

    def to_dict(self) -> dict:
        return {
            "form": "E + A/N^alpha + B/D^beta" if self.joint else "E + A/N^alpha",
            "E": self.E,
            "A": self.A,
            "alpha": self.alpha,
            "B": self.B,
            "beta": self.beta,
            "n_points": self.n_points,
            "distinct_n": self.distinct_n,
            "distinct_d": self.distinct_d,
            "n_range": list(self.n_range),
            "objective": self.objective,
            "intervals": {k: v.to_dict() for k, v in self.intervals.items()},
            "n_bootstrap": len(self.samples),
            "warnings": list(self.warnings),
        }


def _law(E, A, alpha, B, beta, n, d) -> float:
    value = E + A / n**alpha
    if B is not None and d is not None:
        value += B / d**beta
    return float(value)


# ---- objective ------------------------------------------------------------------------------


def _objective(theta, log_n, log_d, log_l, delta, joint):
    """Summed Huber loss of log-residuals / delta^2 and its gradient. theta = (e, a, alpha[, b, beta]).

    Dividing by delta^2 (a constant, so the minimiser is unchanged) puts the objective at O(1) per point,
    where L-BFGS-B's relative stopping tests work; unscaled it is ~1e-6 and they stop early."""
    import numpy as np

    e, a, alpha = theta[0], theta[1], theta[2]
    terms = [a - alpha * log_n, np.full_like(log_n, e)]  # (P,) each
    if joint:
        b, beta = theta[3], theta[4]
        terms.append(b - beta * log_d)
    stack = np.stack(terms)  # (K, P)
    top = stack.max(axis=0)
    weights = np.exp(stack - top)  # (K, P)
    total = weights.sum(axis=0)
    pred = top + np.log(total)
    weights /= total  # softmax: d pred / d term
    r = pred - log_l
    absr = np.abs(r)
    huber = np.where(absr <= delta, 0.5 * r * r, delta * (absr - 0.5 * delta))
    dr = np.clip(r, -delta, delta)
    grad = [np.sum(dr * weights[1]), np.sum(dr * weights[0]), np.sum(-dr * weights[0] * log_n)]
    if joint:
        grad += [np.sum(dr * weights[2]), np.sum(-dr * weights[2] * log_d)]
    scale = 1.0 / (delta * delta)
    return float(huber.sum()) * scale, np.array(grad) * scale


def _start_grid(log_l, joint):
    """Starting points: exponents and log-coefficients spread as in Hoffmann et al. (D.2), with E's
    start tied to the data (a fraction of the smallest observed loss) instead of a fixed range."""
    import itertools

    import numpy as np

    e_starts = [float(np.min(log_l) + math.log(f)) for f in (0.2, 0.6, 0.9)]
    alphas = (0.1, 0.4, 1.0)
    a_starts = (0.0, 5.0, 10.0, 20.0)
    if not joint:
        return [np.array(p) for p in itertools.product(e_starts, a_starts, alphas)]
    return [
        np.array([e, a, al, b, be])
        for e, a, al, b, be in itertools.product(e_starts, (0.0, 8.0, 16.0), (0.2, 0.6), (0.0, 8.0, 16.0), (0.2, 0.6))
    ]


def _minimise(log_n, log_d, log_l, *, delta, joint, starts, maxiter: int = 2000, ftol: float = 1e-13):
    from scipy.optimize import minimize

    bounds = [(-LOG_BOUND, LOG_BOUND), (-LOG_BOUND, LOG_BOUND), EXPONENT_BOUNDS]
    if joint:
        bounds += [(-LOG_BOUND, LOG_BOUND), EXPONENT_BOUNDS]
    best = None
    for x0 in starts:
        res = minimize(
            _objective, x0, args=(log_n, log_d, log_l, delta, joint), jac=True, method="L-BFGS-B", bounds=bounds,
            options={"maxiter": maxiter, "ftol": ftol, "gtol": 1e-9},
        )
        if best is None or res.fun < best.fun:
            best = res
    return best


def _one_blas_thread():
    """A context that keeps BLAS to one thread: L-BFGS-B calls BLAS on 3-5 element vectors, where a
    multi-threaded OpenBLAS on a busy machine spends ~10x the work in thread hand-offs (measured)."""
    import scipy.optimize  # noqa: F401  (load its BLAS first: limits apply to loaded libraries only)

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional speed-up only
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


# ---- public fitting functions -----------------------------------------------------------------


def fit_power_law(
    *,
    n: Sequence[float],
    loss: Sequence[float],
    d: Sequence[float] | None = None,
    delta: float = HUBER_DELTA,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> PowerLawFit:
    """Fit L(N) = E + A/N^alpha (d=None) or L(N, D) = E + A/N^alpha + B/D^beta.

    n: parameter counts (positive); loss: observed losses (positive), one per point; d: token counts.
    Bootstrap: `n_bootstrap` resamples of the points, each refitted from the best fit's optimum and a
    coarse grid; intervals are percentiles at `level`. `seed` makes the bootstrap reproducible.
    """
    import numpy as np

    n_arr = _positive_array("n", n)
    l_arr = _positive_array("loss", loss)
    if len(n_arr) != len(l_arr):
        raise UserError(f"n has {len(n_arr)} values but loss has {len(l_arr)}; give one loss per point")
    joint = d is not None
    d_arr = _positive_array("d", d) if joint else np.ones_like(n_arr)
    if joint and len(d_arr) != len(n_arr):
        raise UserError(f"d has {len(d_arr)} values but n has {len(n_arr)}; give one token count per point")
    k = 5 if joint else 3
    if len(n_arr) < k:
        raise UserError(f"{len(n_arr)} points cannot fit a {k}-parameter law; need at least {k}")
    if not delta > 0:
        raise UserError(f"delta={delta!r} must be positive")
    if n_bootstrap < 0:
        raise UserError(f"n_bootstrap={n_bootstrap!r} must be >= 0")

    log_n, log_d, log_l = np.log(n_arr), np.log(d_arr), np.log(l_arr)
    rng = np.random.default_rng(seed)
    coarse = _start_grid(log_l, joint)[:: 9 if not joint else 36]
    samples = []
    with _one_blas_thread():
        best = _minimise(log_n, log_d, log_l, delta=delta, joint=joint, starts=_start_grid(log_l, joint))
        theta = best.x
        for _ in range(n_bootstrap):
            idx = rng.integers(0, len(n_arr), size=len(n_arr))
            # a resample needs its optimum to the percentiles' resolution, not to 1e-13: a looser stop keeps
            # the bootstrap of a flat fit (exponents against their bounds) from costing thousands of steps
            res = _minimise(log_n[idx], log_d[idx], log_l[idx], delta=delta, joint=joint, starts=[theta, *coarse],
                            maxiter=300, ftol=1e-9)
            samples.append(_natural(res.x, joint))
    point = _natural(theta, joint)
    names = ("E", "A", "alpha", "B", "beta") if joint else ("E", "A", "alpha")
    intervals = {}
    arr = np.array(samples) if samples else np.array([point])
    for i, name in enumerate(names):
        lo, hi = np.quantile(arr[:, i], [(1 - level) / 2, (1 + level) / 2])
        intervals[name] = Interval(value=point[i], lo=float(min(lo, point[i])), hi=float(max(hi, point[i])), level=level)

    distinct_n = len(set(np.round(log_n, 6)))
    distinct_d = len(set(np.round(log_d, 6))) if joint else 0
    warnings = list(_support_warnings(distinct_n=distinct_n, log_n=log_n, log_d=log_d, joint=joint))
    return PowerLawFit(
        E=point[0], A=point[1], alpha=point[2], B=point[3] if joint else None, beta=point[4] if joint else None,
        n_points=len(n_arr), distinct_n=distinct_n, distinct_d=distinct_d,
        n_range=(float(n_arr.min()), float(n_arr.max())), objective=float(best.fun) * delta * delta,
        intervals=intervals, samples=tuple(tuple(s) for s in samples), warnings=tuple(warnings),
    )


def _natural(theta, joint) -> tuple[float, float, float, float, float]:
    e, a, alpha = (float(v) for v in theta[:3])
    if joint:
        return (math.exp(e), math.exp(a), alpha, math.exp(float(theta[3])), float(theta[4]))
    return (math.exp(e), math.exp(a), alpha, math.nan, math.nan)


def _positive_array(name, values):
    import numpy as np

    arr = np.asarray(list(values), dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise UserError(f"{name} must be a non-empty list of numbers")
    bad = [float(v) for v in arr if not (math.isfinite(v) and v > 0)]
    if bad:
        raise UserError(f"{name} has non-positive or non-finite values {bad[:3]}; every value must be > 0")
    return arr


def _support_warnings(*, distinct_n, log_n, log_d, joint):
    import numpy as np

    if distinct_n < MIN_DISTINCT_N:
        yield (
            f"only {distinct_n} distinct parameter count(s): a 3-parameter law through fewer than "
            f"{MIN_DISTINCT_N} scales is not determined by the data; do not extrapolate it"
        )
    if joint:
        x = np.stack([np.ones_like(log_n), log_n, log_d], axis=1)
        if np.linalg.matrix_rank(x, tol=1e-6) < 3:
            yield "N and D vary together (one token count per model size): A/N^alpha and B/D^beta cannot be separated"


__all__ = ["Interval", "PowerLawFit", "fit_power_law", "HUBER_DELTA", "MIN_DISTINCT_N"]
