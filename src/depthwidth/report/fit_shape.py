"""Shape-aware scaling laws: loss as a function of width w (d_model), depth l (n_layers), tokens D and
non-embedding parameters N, fitted on any table of points with bootstrap intervals.

Forms (`FORMS`):
- "liu":        L = E + c_w / w^a_w + c_l / l^a_l + c_D / D^a_D  (Liu, Kangaslahti, Liu and Gore 2026, "Inverse
                depth scaling from most layers being similar", arXiv 2602.05970, eq. 1 and appendix B: fitted on
                the Chinchilla models they report a_w ~ 0.98, a_l ~ 1.2 (1.07 with depth counted as l - 2),
                a_D ~ 0.30, E ~ 1.75);
- "aspect":     L = (E + A / N^alpha + B / D^beta) * (1 + G (ln(w/l) - ln r0)^2): Hoffmann et al. 2022's L(N, D)
                times a penalty in the log aspect ratio. Kaplan et al. 2020 (section 3.1, figure 5) find the loss
                at fixed N within a few percent over a wide range of w/l, rising at the extremes, and about
                the same percentage at every N: a multiplicative bowl with its floor at r0;
- "chinchilla": L = E + A / N^alpha + B / D^beta, blind to shape (the baseline).

Fitting (as `report.fit`, Hoffmann et al. 2022 approach 3): each coefficient as exp(log-coefficient), log L
predicted as a log-sum-exp of the terms (plus log(1 + G u^2) for the penalty), the summed Huber loss
(delta 1e-3) of the log residuals minimised by L-BFGS-B from a grid of starts. A variable that takes one
value in the data (one token budget, one model size) cannot be separated from E: its term is folded
into E and named in `absorbed`, and a prediction at another value of it is flagged (`undetermined`).

Uncertainty: percentile intervals over a nonparametric bootstrap of the points, as `report.fit`. They
describe the spread of the fit over the measured points, not a departure from the assumed form.
The held-out score and the choice between forms are `report.fit_select`.
Everything here is a pure function of the points: no study, store or file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.report.fit import EXPONENT_BOUNDS, HUBER_DELTA, LOG_BOUND, Interval, _one_blas_thread
from depthwidth.report.trends import SCALE_RATIO
from depthwidth.serial import Serializable, hook

FORMS = ("liu", "aspect", "chinchilla")
#: what a user may ask for: a form, or "auto" (the one the held-out score selects, `report.fit_select`)
FORM_CHOICES = ("auto", *FORMS)
FORM_TEXT = {
    "liu": "E + c_w/w^a_w + c_l/l^a_l + c_D/D^a_D",
    "aspect": "(E + A/N^alpha + B/D^beta) * (1 + G (ln(w/l) - ln r0)^2)",
    "chinchilla": "E + A/N^alpha + B/D^beta",
}
#: (coefficient, exponent, variable) of each power-law term
TERMS = {
    "liu": (("c_w", "a_w", "width"), ("c_l", "a_l", "depth"), ("c_D", "a_D", "tokens")),
    "aspect": (("A", "alpha", "params"), ("B", "beta", "tokens")),
    "chinchilla": (("A", "alpha", "params"), ("B", "beta", "tokens")),
}
PENALTY = {"liu": False, "aspect": True, "chinchilla": False}
VARIABLES = ("width", "depth", "tokens", "params")
G_BOUNDS = (0.0, 100.0)
#: R^2 above which a variable counts as a function of the others in the data
COLLINEAR_R2 = 0.995
#: a variable whose values span less than this factor is one scale (the members of an iso-parameter family
#: differ by a few percent in N), as in `report.trends`
ONE_SCALE = SCALE_RATIO


@dataclass(frozen=True, kw_only=True, slots=True)
class LawPoint(Serializable):
    """One measured loss: width = d_model, depth = n_layers, params = non-embedding N (Kaplan's),
    tokens = training tokens D; flops (training FLOPs), heads, seed and label are carried, not fitted."""

    width: float
    depth: float
    tokens: float
    params: float
    loss: float
    flops: float | None = None
    heads: int | None = None
    seed: int | None = None
    label: str = ""

    def __post_init__(self) -> None:
        for name in ("width", "depth", "tokens", "params", "loss"):
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and math.isfinite(value) and value > 0):
                raise UserError(f"{name}={value!r} must be a positive finite number")

    @property
    def config(self) -> tuple[float, float, float]:
        return (float(self.width), float(self.depth), float(self.tokens))


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeLawFit(Serializable):
    """A fitted form: natural parameters (`names` order), percentile intervals, bootstrap samples."""

    form: str
    names: tuple[str, ...]
    values: tuple[float, ...]
    intervals: dict[str, Interval]
    terms: tuple[tuple[str, str, str], ...]  # the terms fitted (absorbed ones left out)
    penalty: bool
    absorbed: dict[str, float]  # variable -> its one value in the data (its term folded into E)
    ranges: dict[str, tuple[float, float]]  # width, depth, tokens, params, aspect over the points
    n_points: int
    configs: int
    in_sample_error: float  # mean relative |error| on the fitted points
    level: float
    warnings: tuple[str, ...] = ()
    samples: tuple[tuple[float, ...], ...] = field(default=(), repr=False, metadata=hook(skip=True))

    @property
    def params(self) -> dict[str, float]:
        return dict(zip(self.names, self.values))

    @property
    def text(self) -> str:
        return FORM_TEXT[self.form]

    def predict(self, *, width: float, depth: float, tokens: float, params: float) -> float:
        import numpy as np

        return float(_predict(np.array([self.values]), self, width=width, depth=depth, tokens=tokens,
                              params=params)[0])

    def predict_samples(self, *, width: float, depth: float, tokens: float, params: float):
        """The prediction under every bootstrap sample (a numpy array; the point fit when there are none)."""
        import numpy as np

        rows = np.array(self.samples) if self.samples else np.array([self.values])
        return _predict(rows, self, width=width, depth=depth, tokens=tokens, params=params)

    def predict_interval(self, *, width: float, depth: float, tokens: float, params: float) -> Interval:
        import numpy as np

        point = self.predict(width=width, depth=depth, tokens=tokens, params=params)
        values = self.predict_samples(width=width, depth=depth, tokens=tokens, params=params)
        values = values[np.isfinite(values)]
        lo, hi = np.quantile(values, [(1 - self.level) / 2, (1 + self.level) / 2]) if values.size else (point, point)
        return Interval(value=point, lo=float(min(lo, point)), hi=float(max(hi, point)), level=self.level)

    def undetermined(self, *, tokens: float, params: float) -> str | None:
        """Why the loss (not the ranking of shapes) at these values is not determined by the data: an
        absorbed variable outside the narrow range it was measured over. None when it is."""
        asked = {"tokens": tokens, "params": params}
        off = []
        for k, v in asked.items():
            lo, hi = self.ranges[k]
            if k in self.absorbed and not lo * (1 - 1e-6) <= v <= hi * (1 + 1e-6):
                off.append(f"{k} {v:.4g} (measured only at {_span(lo, hi)})")
        return None if not off else "the data hold one scale of " + ", ".join(off) + ", so its term is folded into E"


def _span(lo: float, hi: float) -> str:
    return f"{lo:.4g}" if math.isclose(lo, hi, rel_tol=1e-6) else f"{lo:.4g} to {hi:.4g}"


def _predict(rows, fit: ShapeLawFit, *, width, depth, tokens, params):
    """Loss under each row of natural parameters (S, p) -> (S,)."""
    import numpy as np

    x = {"width": width, "depth": depth, "tokens": tokens, "params": params}
    col = {n: i for i, n in enumerate(fit.names)}
    value = rows[:, col["E"]].copy()
    for coef, exp_, var in fit.terms:
        value += rows[:, col[coef]] * float(x[var]) ** (-rows[:, col[exp_]])
    if fit.penalty:
        u = math.log(width / depth) - np.log(rows[:, col["r0"]])
        value *= 1 + rows[:, col["G"]] * u * u
    return value


# ---- the objective ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class _Problem:
    xs: object  # (K, P) log variables of the fitted terms
    u: object  # (P,) log aspect ratio
    log_l: object  # (P,)
    penalty: bool
    delta: float


def _objective(theta, pb: _Problem):
    """Huber loss of the log residuals / delta^2 and its gradient. theta = (e, c_1, a_1, ..., [G, rho])."""
    import numpy as np

    k = pb.xs.shape[0]
    c, a = theta[1:1 + 2 * k:2], theta[2:2 + 2 * k:2]
    stack = np.vstack([c[:, None] - a[:, None] * pb.xs, np.full((1, pb.xs.shape[1]), theta[0])])  # (K+1, P)
    top = stack.max(axis=0)
    w = np.exp(stack - top)
    total = w.sum(axis=0)
    pred = top + np.log(total)
    w /= total
    if pb.penalty:
        g, rho = theta[-2], theta[-1]
        d = pb.u - rho
        q = 1 + g * d * d
        pred = pred + np.log(q)
    r = pred - pb.log_l
    absr = np.abs(r)
    huber = np.where(absr <= pb.delta, 0.5 * r * r, pb.delta * (absr - 0.5 * pb.delta))
    dr = np.clip(r, -pb.delta, pb.delta)
    grad = np.empty_like(theta)
    grad[0] = np.sum(dr * w[k])
    grad[1:1 + 2 * k:2] = (w[:k] * dr).sum(axis=1)
    grad[2:2 + 2 * k:2] = -(w[:k] * pb.xs * dr).sum(axis=1)
    if pb.penalty:
        grad[-2] = np.sum(dr * d * d / q)
        grad[-1] = np.sum(dr * -2 * g * d / q)
    scale = 1.0 / (pb.delta * pb.delta)
    return float(huber.sum()) * scale, grad * scale


def _starts(pb: _Problem):
    """Exponents 0.3 and 1 per term, E at three fractions of the lowest loss, each coefficient set so
    that its term carries an equal share of the rest of the lowest loss at the median of its variable."""
    import itertools

    import numpy as np

    k = pb.xs.shape[0]
    l_min = float(np.exp(np.min(pb.log_l)))
    med = np.median(pb.xs, axis=1) if k else np.array([])
    out = []
    pens = [(0.02, float(np.median(pb.u))), (0.3, float(np.median(pb.u)))] if pb.penalty else [()]
    for frac in (0.3, 0.6, 0.85):
        e = math.log(frac * l_min)
        share = math.log(max((1 - frac) * l_min / max(k, 1), 1e-12))
        for exps in itertools.product((0.3, 1.0), repeat=k):
            body = [v for j, a in enumerate(exps) for v in (share + a * med[j], a)]
            for pen in pens:
                out.append(np.array([e, *body, *pen], dtype=float))
    return out


def _minimise(pb: _Problem, starts, bounds, *, keep: int = 3, scout_iterations: int = 20):
    """L-BFGS-B from every start: with more than `keep` starts, each runs `scout_iterations` first and only
    the `keep` lowest run on to convergence (the objective is not convex; most starts fall into the same
    few basins early)."""
    from scipy.optimize import minimize

    def run(x0, maxiter):
        x0 = [min(max(v, lo), hi) for v, (lo, hi) in zip(x0, bounds)]
        return minimize(_objective, x0, args=(pb,), jac=True, method="L-BFGS-B", bounds=bounds,
                        options={"maxiter": maxiter, "ftol": 1e-11, "gtol": 1e-7})

    if len(starts) > keep:
        scouts = sorted((run(x0, scout_iterations) for x0 in starts), key=lambda r: r.fun)
        starts = [r.x for r in scouts[:keep]]
    return min((run(x0, 3000) for x0 in starts), key=lambda r: r.fun)


#: parameters fitted as logarithms (positive by construction)
LOGGED = frozenset({"E", "r0", *(c for terms in TERMS.values() for c, _, _ in terms)})


def _natural(theta, names) -> tuple[float, ...]:
    """(e, c.., a.., [G, rho]) -> E, coefficients, exponents, G, r0 in `names` order."""
    return tuple(math.exp(float(v)) if name in LOGGED else float(v) for name, v in zip(names, theta))


def _raw(values, names) -> tuple[float, ...]:
    """The inverse of `_natural`."""
    return tuple(math.log(max(float(v), 1e-300)) if name in LOGGED else float(v) for name, v in zip(names, values))


# ---- fitting -------------------------------------------------------------------------------------


def fit_shape_law(points: Sequence[LawPoint], *, form: str = "liu", n_bootstrap: int = 200, level: float = 0.95,
                  seed: int = 0, delta: float = HUBER_DELTA, init: ShapeLawFit | None = None) -> ShapeLawFit:
    """Fit `form` (one of FORMS) to `points` with `n_bootstrap` resamples; intervals at `level`. `init`: a
    fit of the same form on related points (a superset) whose optimum starts the search, with a few
    points of the grid, instead of the whole grid."""
    import numpy as np

    layout = _layout(points, form)
    if not 0 < level < 1:
        raise UserError(f"level={level!r} must lie in (0, 1)")
    if n_bootstrap < 0:
        raise UserError(f"n_bootstrap={n_bootstrap!r} must be >= 0")
    pb, names, bounds = layout.problem(np.arange(len(points)), delta)
    rng = np.random.default_rng(seed)
    samples = []
    with _one_blas_thread():
        starts = _starts(pb)
        if init is not None and init.names == names:
            starts = [np.array(_raw(init.values, names)), *starts[:: max(1, len(starts) // 2)]]
        best = _minimise(pb, starts, bounds)
        for _ in range(n_bootstrap):  # each resample refitted from the optimum of all the points
            idx = rng.integers(0, len(points), size=len(points))
            sub, _, _ = layout.problem(idx, delta)
            samples.append(_natural(_minimise(sub, [best.x], bounds).x, names))
    point = _natural(best.x, names)
    coefs = {c for c, _, _ in layout.terms} | {"E"}
    at_bound = [n for n, v, (lo, hi) in zip(names, best.x, bounds)
                if n not in coefs and (v - lo < 1e-4 or hi - v < 1e-4) and not (n == "G" and v - lo < 1e-4)]
    warnings = layout.warnings + tuple(f"{n} = {p:.4g} sits at the end of its allowed range: the data do not pin it"
                                       for n, p in zip(names, point) if n in at_bound)
    arr = np.array(samples) if samples else np.array([point])
    intervals = {}
    for i, name in enumerate(names):
        lo, hi = np.quantile(arr[:, i], [(1 - level) / 2, (1 + level) / 2])
        intervals[name] = Interval(value=point[i], lo=float(min(lo, point[i])), hi=float(max(hi, point[i])),
                                   level=level)
    fit = ShapeLawFit(form=form, names=names, values=point, intervals=intervals, terms=layout.terms,
                      penalty=layout.penalty, absorbed=layout.absorbed, ranges=layout.ranges, n_points=len(points),
                      configs=layout.configs, in_sample_error=0.0, level=level, warnings=warnings,
                      samples=tuple(samples))
    err = relative_error(fit, points)
    return ShapeLawFit(**{**{f: getattr(fit, f) for f in fit.__dataclass_fields__}, "in_sample_error": err})


def relative_error(fit: ShapeLawFit, points: Sequence[LawPoint]) -> float:
    """Mean |L_hat - L| / L of `fit` over `points`."""
    errs = [abs(fit.predict(width=p.width, depth=p.depth, tokens=p.tokens, params=p.params) - p.loss) / p.loss
            for p in points]
    return sum(errs) / len(errs)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """What a form fits on these points: its active terms, parameter names, bounds and warnings."""

    form: str
    logs: dict  # variable -> (P,) log values
    u: object
    log_l: object
    terms: tuple[tuple[str, str, str], ...]
    penalty: bool
    absorbed: dict[str, float]
    ranges: dict[str, tuple[float, float]]
    configs: int
    warnings: tuple[str, ...]

    def problem(self, idx, delta):
        import numpy as np

        xs = np.array([self.logs[v][idx] for _, _, v in self.terms]).reshape(len(self.terms), len(idx))
        pb = _Problem(xs=xs, u=self.u[idx], log_l=self.log_l[idx], penalty=self.penalty, delta=delta)
        names = ("E", *[n for c, a, _ in self.terms for n in (c, a)], *(("G", "r0") if self.penalty else ()))
        bounds = [(-LOG_BOUND, LOG_BOUND)] + [b for _ in self.terms for b in ((-LOG_BOUND, LOG_BOUND), EXPONENT_BOUNDS)]
        if self.penalty:
            lo, hi = float(self.u.min()), float(self.u.max())
            bounds += [G_BOUNDS, (lo - math.log(4), hi + math.log(4))]
        return pb, names, bounds


def _layout(points: Sequence[LawPoint], form: str) -> _Layout:
    import numpy as np

    if form not in FORMS:
        raise UserError(f"form={form!r} is not a shape-aware law here; expected one of {', '.join(FORMS)}")
    points = list(points)
    if any(not isinstance(p, LawPoint) for p in points):
        raise UserError("points must be LawPoint records")
    logs = {v: np.log(np.array([float(getattr(p, v)) for p in points])) for v in VARIABLES} if points else {}
    varying = {v for v in VARIABLES if points and float(logs[v].max() - logs[v].min()) > math.log(ONE_SCALE)}
    terms = tuple(t for t in TERMS[form] if t[2] in varying)
    absorbed = {t[2]: float(np.exp(logs[t[2]].mean())) for t in TERMS[form] if t[2] not in varying and points}
    u = np.log(np.array([p.width / p.depth for p in points])) if points else np.array([])
    penalty = PENALTY[form] and len(set(np.round(u, 6))) >= 3
    span = {v: _span(float(np.exp(logs[v].min())), float(np.exp(logs[v].max()))) for v in absorbed}
    warnings = [f"{v} takes one scale in the data ({span[v]}): "
                "its term is folded into E, and the loss at another scale is not determined by the data"
                for v in absorbed]
    if PENALTY[form] and not penalty:
        warnings.append("fewer than 3 aspect ratios in the data: the aspect-ratio penalty is left out")
    n_params = 1 + 2 * len(terms) + (2 if penalty else 0)
    configs = len({p.config for p in points})
    if len(points) < n_params + 1:
        raise UserError(f"{len(points)} points cannot fit the {n_params}-parameter {form} law; need at least "
                        f"{n_params + 1}")
    warnings += _collinear([t[2] for t in terms], logs)
    ranges = {v: (float(min(getattr(p, v) for p in points)), float(max(getattr(p, v) for p in points)))
              for v in VARIABLES}
    ranges["aspect"] = (float(np.exp(u.min())), float(np.exp(u.max())))
    return _Layout(form=form, logs=logs, u=u, log_l=np.log(np.array([p.loss for p in points])), terms=terms,
                   penalty=penalty, absorbed=absorbed, ranges=ranges, configs=configs, warnings=tuple(warnings))


def _collinear(variables: list[str], logs: dict) -> list[str]:
    """A warning for each fitted variable that is (almost) a linear function of the others in log space."""
    import numpy as np

    out = []
    for v in variables:
        others = [w for w in variables if w != v]
        if not others:
            continue
        x = np.column_stack([np.ones_like(logs[v])] + [logs[w] for w in others])
        coef, *_ = np.linalg.lstsq(x, logs[v], rcond=None)
        resid = logs[v] - x @ coef
        total = float(np.sum((logs[v] - logs[v].mean()) ** 2))
        if total > 0 and 1 - float(resid @ resid) / total > COLLINEAR_R2:
            out.append(f"{v} varies with {' and '.join(others)} in the data (log-linear, R^2 > {COLLINEAR_R2}): "
                       "their terms cannot be told apart; read their sum, not each exponent")
    return out


__all__ = ["FORMS", "FORM_CHOICES", "FORM_TEXT", "LawPoint", "ShapeLawFit", "fit_shape_law", "relative_error"]
