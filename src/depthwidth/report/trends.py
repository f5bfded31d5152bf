"""Trends over scales: one L(N) fit per aspect-ratio family, the best family, and its extrapolation.

An aspect-ratio family is the set of shapes whose d_model/n_layers falls in the same bin on a log2
scale (`bins_per_octave` bins per factor of 2; by default the nearest power of 2), so a study that
plans "the same aspect ratios" at several budgets gets one family per ratio even though the widths
of its members are rounded to an alignment grid. Kaplan et al. 2020 (section 3.1, figure 5) compare
aspect ratios this way, with N the non-embedding parameter count, as here.

Each seed's final validation loss (at the shape's selected learning rate) is one point, so the
bootstrap of `fit.fit_power_law` resamples seed noise together with the scales. Extrapolation
uses the per-family L(N) fits at multiples of the largest measured N, with bootstrap bands; it
says in plain words when the data cannot support it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

from depthwidth.errors import UserError
from depthwidth.present.units import count
from depthwidth.report.fit import MIN_DISTINCT_N, Interval, PowerLawFit, fit_power_law
from depthwidth.serial import Serializable

#: N values closer than this factor are one scale
SCALE_RATIO = 1.25


@dataclass(frozen=True, kw_only=True, slots=True)
class TrendPoint:
    """One measured loss: a seed's final validation loss of one shape."""

    label: str  # shape label
    aspect_ratio: float  # d_model / n_layers
    n: float  # non-embedding parameters
    d: float  # training tokens
    loss: float

    def __post_init__(self) -> None:
        for name in ("aspect_ratio", "n", "d", "loss"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"{name}={value!r} must be a positive finite number")


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyTrend(Serializable):
    """The fit of one aspect-ratio family (fit None with the reason when it could not be fitted)."""

    family: str
    aspect_ratio: float  # median d_model/n_layers of the members
    labels: tuple[str, ...]
    n_points: int
    distinct_n: int
    fit: PowerLawFit | None
    joint_fit: PowerLawFit | None
    skipped: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtrapolationPoint(Serializable):
    """The predicted loss of one family at a parameter count beyond (or inside) the data."""

    family: str
    n: float
    factor: float  # n / largest measured N of that family
    loss: Interval


@dataclass(frozen=True, kw_only=True, slots=True)
class TrendReport(Serializable):
    families: tuple[FamilyTrend, ...]
    best_family: str | None  # lowest predicted loss at the first extrapolation target
    extrapolation: tuple[ExtrapolationPoint, ...]  # every fitted family at every target
    supported: bool  # False when a warning says the data cannot support the extrapolation
    warnings: tuple[str, ...]


def family_of(aspect_ratio: float, *, bins_per_octave: int = 1) -> str:
    """'d/L~32': the aspect ratio rounded to the nearest of 2^(k / bins_per_octave)."""
    if not aspect_ratio > 0:
        raise UserError(f"aspect_ratio={aspect_ratio!r} must be positive")
    if bins_per_octave < 1:
        raise UserError(f"bins_per_octave={bins_per_octave!r} must be >= 1")
    k = round(math.log2(aspect_ratio) * bins_per_octave)
    centre = 2 ** (k / bins_per_octave)
    return f"d/L~{centre:.3g}"


def fit_trends(
    points: Sequence[TrendPoint],
    *,
    factors: Sequence[float] = (10.0, 100.0),
    bins_per_octave: int = 1,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
    min_scales: int = 2,
) -> TrendReport:
    """Fit L(N) per aspect-ratio family (and L(N, D) where token counts vary independently of N) measured
    at `min_scales` scales or more (the study's `[report]` rule; at least 2), pick the family with the lowest predicted loss at `factors[0]` x the largest measured N, and
    extrapolate every fitted family to each factor with a bootstrap band at `level`."""
    if not factors or any(not f > 0 for f in factors):
        raise UserError(f"factors={list(factors)!r} must be positive multiples of the largest measured N")
    groups: dict[str, list[TrendPoint]] = defaultdict(list)
    for p in points:
        groups[family_of(p.aspect_ratio, bins_per_octave=bins_per_octave)].append(p)

    families = []
    for name, pts in sorted(groups.items(), key=lambda kv: _median([p.aspect_ratio for p in kv[1]])):
        families.append(_fit_family(name, pts, n_bootstrap=n_bootstrap, level=level, seed=seed,
                                    min_scales=min_scales))

    warnings: list[str] = []
    fitted = [f for f in families if f.fit is not None]
    if not points:
        warnings.append("no completed runs: nothing to fit")
    elif not fitted:
        most = max((f.distinct_n for f in families), default=0)
        warnings.append(
            f"no aspect-ratio family was measured at {MIN_DISTINCT_N} or more scales (at most {most}): "
            "no trend can be fitted, and a conclusion from one scale does not transfer to others by itself"
        )
    if not fitted:
        return TrendReport(families=tuple(families), best_family=None, extrapolation=(), supported=False,
                           warnings=tuple(warnings))
    best, extrapolation, caveats, notes = _extrapolate(fitted, factors=factors, level=level)
    return TrendReport(families=tuple(families), best_family=best, extrapolation=extrapolation,
                       supported=not caveats, warnings=tuple(warnings + caveats + notes))


def _extrapolate(fitted: list[FamilyTrend], *, factors: Sequence[float],
                 level: float) -> tuple[str, tuple[ExtrapolationPoint, ...], list[str], list[str]]:
    """(best family, every fitted family at every factor, the reasons the data cannot support the pick,
    notes that hold however good the data)."""
    n_max = max(f.fit.n_range[1] for f in fitted)
    extrapolation = tuple(ExtrapolationPoint(family=f.family, n=n, factor=n / f.fit.n_range[1],
                                             loss=f.fit.predict_interval(n, level=level))
                          for f in fitted for n in (n_max * factor for factor in factors))
    first = [p for p in extrapolation if math.isclose(p.n, n_max * factors[0])]
    best_point = min(first, key=lambda p: p.loss.value)
    best = best_point.family
    best_trend = next(f for f in fitted if f.family == best)
    caveats: list[str] = []
    if best_trend.distinct_n < MIN_DISTINCT_N:
        caveats.append(
            f"{best}: measured at only {best_trend.distinct_n} scales (sizes more than {SCALE_RATIO:g}x apart): "
            f"a 3-parameter law through fewer than {MIN_DISTINCT_N} scales is not determined by the data; "
            "do not extrapolate it")
    else:
        caveats += [f"{best}: {w}" for w in best_trend.fit.warnings]
    for p in first:
        if p.family != best and p.loss.overlaps(best_point.loss):
            caveats.append(
                f"at N={count(n_max * factors[0])} the {level:.0%} bands of {best} "
                f"[{best_point.loss.lo:.3f}, {best_point.loss.hi:.3f}] and {p.family} "
                f"[{p.loss.lo:.3f}, {p.loss.hi:.3f}] overlap: the data does not single out a best aspect ratio there")
    notes = []
    if max(factors) > 10:
        notes.append(f"extrapolating {max(factors):g}x beyond the largest measured model: the bands assume the power "
                     "law keeps holding there, which the data cannot show")
    return best, extrapolation, caveats, notes


def count_scales(ns: Sequence[float], *, ratio: float = SCALE_RATIO) -> int:
    """Distinct model sizes: sorted N values more than `ratio` apart start a new scale (members of one
    iso-parameter family differ by a few percent and are one scale, not several)."""
    scales, last = 0, None
    for n in sorted(ns):
        if last is None or n > last * ratio:
            scales += 1
            last = n
    return scales


def _fit_family(name: str, pts: list[TrendPoint], *, n_bootstrap: int, level: float, seed: int,
                min_scales: int = 2) -> FamilyTrend:
    ns = [p.n for p in pts]
    distinct_n = count_scales(ns)
    distinct_d = len({round(math.log(p.d), 6) for p in pts})
    labels = tuple(sorted({p.label for p in pts}))
    base = dict(family=name, aspect_ratio=_median([p.aspect_ratio for p in pts]), labels=labels,
                n_points=len(pts), distinct_n=distinct_n)
    if distinct_n < max(2, min_scales) or len(pts) < 3:
        rule = f" (a fit needs {min_scales} scales: [report] min_scales)" if distinct_n >= 2 else ""
        return FamilyTrend(**base, fit=None, joint_fit=None,
                           skipped=f"measured at {distinct_n} scale(s) with {len(pts)} point(s): no trend to fit{rule}")
    fit = fit_power_law(n=ns, loss=[p.loss for p in pts], n_bootstrap=n_bootstrap, level=level, seed=seed)
    joint = None
    if distinct_d > 1 and len(pts) >= 6 and not _collinear(pts):
        joint = fit_power_law(n=ns, d=[p.d for p in pts], loss=[p.loss for p in pts],
                              n_bootstrap=n_bootstrap, level=level, seed=seed)
    return FamilyTrend(**base, fit=fit, joint_fit=joint, skipped=None)


def _collinear(pts: list[TrendPoint]) -> bool:
    """True when log D is an affine function of log N over the points (D set by a tokens-per-param rule)."""
    xs = [math.log(p.n) for p in pts]
    ys = [math.log(p.d) for p in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return True
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return all(abs(y - my - slope * (x - mx)) < 1e-6 for x, y in zip(xs, ys))


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])


__all__ = ["ExtrapolationPoint", "FamilyTrend", "SCALE_RATIO", "TrendPoint", "TrendReport", "count_scales", "family_of",
           "fit_trends"]
