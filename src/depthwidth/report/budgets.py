"""The ranking of shapes against the training budget: where a study's horizons (`[train] horizons`, the
cooldown branches of `depthwidth.study.horizons`) give each shape several token budgets from one run.

For each budget group with horizon groups (`G`, `G@0.25`, `G@0.5`, ...) a `Ladder` holds, per shape, its
loss at each budget - mean and standard error over seeds, at the learning rate chosen at the full horizon -
with the budget as training tokens, tokens per non-embedding parameter, model training FLOPs and seconds
predicted on the report's hardware (`study.timebudget.predicted_seconds`). From those:

- the ranking at each budget, the winner and its margin over the runner-up with the margin's standard error;
- `crossovers`: each pair of shapes whose order flips between two measured budgets, the flip placed by
  linear interpolation of their loss difference in log tokens, with an interval from moving each end of
  the difference by one standard error (never outside the two budgets: no extrapolation); `resolved` when
  the difference is beyond two standard errors at both budgets (else the swap may be seed noise);
- `at_equal_time`: each shape's loss at the predicted seconds of the other points, interpolated in log
  seconds between its own measured budgets only (a shape whose budgets do not cover a time is left out
  at that time, and said so).
A protocol warning is raised when every run saw fewer than one token per non-embedding parameter: short
budgets exaggerate the gaps between shapes and penalise depth the most (Chavarro Polania et al. 2026,
arXiv 2606.05186; Hägele et al. 2024 show the ordering of runs changing along a WSD run).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from depthwidth.report.gates import learned
from depthwidth.study.horizons import split_horizon

SHORT_BUDGET = 1.0  # tokens per non-embedding parameter below which every run counts as a short budget
SOURCE = ("Chavarro Polania et al. 2026 (arXiv 2606.05186): short training budgets exaggerate the gaps "
          "between shapes and penalise depth the most")


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetPoint:
    shape_label: str
    n_layers: int
    fraction: float  # of the full horizon's steps
    tokens: int
    tokens_per_param: float  # per non-embedding parameter
    flops: float  # model training FLOPs (train_flops_per_token x tokens)
    seconds: float | None  # predicted on the report's hardware (None: not predictable there)
    loss: float
    sem: float | None  # standard error over seeds (None with one seed)
    seeds: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Crossover:
    a: str  # better at the smaller budget
    b: str  # better at the larger budget
    tokens: float  # interpolated budget at which their order flips
    low: float  # interval (one standard error of the difference at each end), within the bracket
    high: float
    between: tuple[int, int]  # the two measured budgets (tokens) it lies between
    resolved: bool = False  # the difference is beyond two standard errors at both budgets: a real swap


@dataclass(frozen=True, kw_only=True, slots=True)
class Ladder:
    group: str
    points: tuple[BudgetPoint, ...]
    verdicts: tuple[str, ...]  # one per budget, smallest first
    crossovers: tuple[Crossover, ...]
    equal_time: tuple[dict, ...] = ()  # {"seconds", "ranking": [(label, loss)], "outside": [labels]}


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetRanking:
    ladders: tuple[Ladder, ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def _sem(values) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def budget_ranking(results, *, seconds_of=None) -> BudgetRanking:
    """The ranking against budget of every group with horizons among `results` (`ShapeResult`s);
    `seconds_of(result, tokens)` predicts training seconds (None: no time axis)."""
    by_group: dict[str, list] = {}
    unlearned: dict[str, list[str]] = {}
    for r in results:
        parent = split_horizon(r.group)
        base, fraction = (parent if parent is not None else (r.group, 1.0))
        if r.seed_losses and r.tokens and not learned(r):  # not below the bigram baseline (study.validity): not ranked
            unlearned.setdefault(base, []).append(f"{r.shape_label} at {fraction:g}")
        elif r.seed_losses and r.tokens:
            by_group.setdefault(base, []).append((fraction, r))
    ladders = []
    for group, members in by_group.items():
        if len({f for f, _ in members}) < 2:
            continue
        points = tuple(sorted((_point(r, f, seconds_of) for f, r in members), key=lambda p: (p.shape_label, p.tokens)))
        ladders.append(Ladder(group=group, points=points, verdicts=tuple(_verdicts(points)),
                              crossovers=tuple(_crossovers(points)), equal_time=tuple(_equal_time(points))))
    warnings = [f"{g}: {len(v)} point(s) not below the bigram baseline are left out of the ranking against budget "
                f"({', '.join(v)})" for g, v in unlearned.items()]
    ratios = [p.tokens_per_param for lad in ladders for p in lad.points] or \
        [r.tokens / r.non_embedding_params for r in results if r.tokens and r.non_embedding_params]
    if ratios and max(ratios) < SHORT_BUDGET:
        warnings.append(f"every run saw fewer than {SHORT_BUDGET:g} token per non-embedding parameter (at most "
                        f"{max(ratios):.2g}): {SOURCE}; read the ranking as one at a short budget")
    return BudgetRanking(ladders=tuple(ladders), warnings=tuple(warnings))


def _point(r, fraction: float, seconds_of) -> BudgetPoint:
    seconds = seconds_of(r, r.tokens) if seconds_of is not None else None
    return BudgetPoint(shape_label=r.shape_label, n_layers=r.shape.n_layers, fraction=fraction, tokens=int(r.tokens),
                       tokens_per_param=r.tokens / max(1, r.non_embedding_params),
                       flops=float(r.train_flops_per_token) * r.tokens, seconds=seconds,
                       loss=statistics.fmean(r.seed_losses), sem=_sem(r.seed_losses), seeds=len(r.seed_losses))


def _by_budget(points) -> dict[float, list[BudgetPoint]]:
    out: dict[float, list[BudgetPoint]] = {}
    for p in points:
        out.setdefault(p.fraction, []).append(p)
    return dict(sorted(out.items()))


def _verdicts(points) -> list[str]:
    lines = []
    for fraction, pts in _by_budget(points).items():
        ranked = sorted(pts, key=lambda p: p.loss)
        best = ranked[0]
        r = statistics.fmean(p.tokens_per_param for p in pts)
        text = f"at {r:.2g} tokens/param ({fraction:g} of the run): {best.shape_label} is best ({best.loss:.4f})"
        if len(ranked) > 1:
            second = ranked[1]
            margin = second.loss - best.loss
            err = _combined(best.sem, second.sem)
            text += (f", {margin:.3f}" + (f" +/- {err:.3f}" if err is not None else "")
                     + f" nats ahead of {second.shape_label}")
            if err is not None and margin < 2 * err:
                text += " (within two standard errors: not resolved)"
        lines.append(text)
    return lines


def _combined(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else math.hypot(a, b)


def _crossovers(points) -> list[Crossover]:
    series: dict[str, dict[float, BudgetPoint]] = {}
    for p in points:
        series.setdefault(p.shape_label, {})[p.fraction] = p
    labels = sorted(series)
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            common = sorted(set(series[a]) & set(series[b]))
            for lo, hi in zip(common, common[1:]):
                pa, pb, qa, qb = series[a][lo], series[b][lo], series[a][hi], series[b][hi]
                d0, d1 = pa.loss - pb.loss, qa.loss - qb.loss
                if d0 == 0 or d1 == 0 or (d0 > 0) == (d1 > 0):
                    continue
                x0, x1 = math.log(pa.tokens), math.log(qa.tokens)
                s0, s1 = _combined(pa.sem, pb.sem) or 0.0, _combined(qa.sem, qb.sem) or 0.0
                at = _root(x0, x1, d0, d1)
                ends = [_root(x0, x1, d0 + u * s0, d1 + v * s1) for u in (-1, 1) for v in (-1, 1)]
                ends = [x for x in ends if x is not None] + [at]
                first, second = (a, b) if d0 < 0 else (b, a)
                resolved = bool(s0 and s1 and abs(d0) > 2 * s0 and abs(d1) > 2 * s1)
                out.append(Crossover(a=first, b=second, tokens=math.exp(at), low=math.exp(max(x0, min(ends))),
                                     high=math.exp(min(x1, max(ends))), between=(pa.tokens, qa.tokens),
                                     resolved=resolved))
    return out


def _root(x0: float, x1: float, d0: float, d1: float) -> float | None:
    """Where the line through (x0, d0) and (x1, d1) crosses 0, clamped to [x0, x1]; None when parallel."""
    if d1 == d0:
        return None
    x = x0 + (x1 - x0) * d0 / (d0 - d1)
    return min(x1, max(x0, x))


def _equal_time(points) -> list[dict]:
    series: dict[str, list[BudgetPoint]] = {}
    for p in points:
        if p.seconds is not None and p.seconds > 0:
            series.setdefault(p.shape_label, []).append(p)
    if len(series) < 2:
        return []
    times = sorted({p.seconds for pts in series.values() for p in pts})
    out = []
    for t in times:
        ranking, outside = [], []
        for label, pts in sorted(series.items()):
            loss = _interp_log(sorted(pts, key=lambda p: p.seconds), t)
            (outside.append(label) if loss is None else ranking.append((label, loss)))
        if len(ranking) > 1:
            out.append({"seconds": t, "ranking": sorted(ranking, key=lambda x: x[1]), "outside": outside})
    return out


def _interp_log(pts, t: float) -> float | None:
    """Loss at predicted time `t`, linear in log seconds between the two measured points around it."""
    for p in pts:
        if math.isclose(p.seconds, t, rel_tol=1e-9):
            return p.loss
    for p, q in zip(pts, pts[1:]):
        if p.seconds < t < q.seconds:
            w = (math.log(t) - math.log(p.seconds)) / (math.log(q.seconds) - math.log(p.seconds))
            return p.loss + w * (q.loss - p.loss)
    return None


__all__ = ["BudgetPoint", "BudgetRanking", "Crossover", "Ladder", "budget_ranking"]
