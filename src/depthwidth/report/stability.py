"""Verdict stability: does a cheap proxy order a study's shapes as its most expensive setting does?

DataDecide (Magnusson et al. 2025, arXiv 2504.11393) calls this *decision accuracy*: the share of pairs of
candidates that the small (cheap) setting orders as the target setting does. They report that ranking at 150M
parameters, with under 2% of the target's compute, orders about 80% of pairs as the 1B runs do.

A *ladder* is one parametrization's budget groups: the full-horizon groups across scales and their horizon groups
(`G@0.25` = the shapes of `G` at a quarter of its tokens, `depthwidth.study.horizons`). A group's scale is the mean
non-embedding parameter count of its shapes; the *target* is the full-horizon group of the largest scale. Every
other group of the ladder is a *proxy*:
- kind "horizon": a shorter horizon of the target group; shapes matched by label (they are the same shapes);
- kind "scale": the full-horizon group of a smaller scale, or one of its horizons; each target shape is matched to
  the proxy shape of its aspect-ratio family (`report.trends.family_of`), the nearest in log aspect ratio when the
  family holds several. A pair of target shapes is compared only when both have a match, and distinct matches.

For each proxy: pairs = every such pair of target shapes; a pair agrees when the sign of loss_a - loss_b (means over
seeds) is the same at the proxy and at the target; an exact tie, at either, counts as a disagreement. Decision
accuracy = agree / pairs. Its interval resamples each shape's seed losses with replacement, independently at the
proxy and at the target, `n_bootstrap` times (`random.Random(seed)`, the same draws for every call), and takes
percentiles at `level`; with a shape of a single seed there is nothing to resample, so no interval (and the line
says so). `fraction_of_target_compute` = sum of tokens x train_flops_per_token over the compared shapes at the
proxy, over the same at the target (model FLOPs: a horizon's fraction is its share of the tokens).

Results for which `learned(result)` is False (a run that did not learn: its loss says nothing of the shape) are left
out and named in `left_out`. Pure: no I/O, no plotting (the figure and the HTML: `report.stability_plot`).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Callable, Sequence

from depthwidth.errors import UserError
from depthwidth.report.trends import family_of
from depthwidth.serial import Serializable, hook
from depthwidth.study.horizons import split_horizon

#: the share of pairs DataDecide's best small-scale proxies order right (Magnusson et al. 2025)
DATADECIDE_ACCURACY = 0.8
SOURCE = "DataDecide (Magnusson et al. 2025, arXiv 2504.11393): about 80% of pairs at under 2% of the compute"
KINDS = ("horizon", "scale")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyAgreement(Serializable):
    """How one proxy orders the target's shapes. `accuracy` is None without a pair; `low`/`high` the
    bootstrap interval (None: no pair, or a shape with a single seed)."""

    ladder: str
    proxy: str  # the proxy's group label
    kind: str  # "horizon" | "scale"
    fraction_of_target_compute: float | None  # None: a compared shape has no token count
    pairs: int
    agree: int
    accuracy: float | None
    low: float | None
    high: float | None
    line: str
    #: (target shape, proxy shape) of every target shape with a match in the proxy
    matched: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"kind={self.kind!r} must be one of {', '.join(KINDS)}")
        if not 0 <= self.agree <= self.pairs:
            raise UserError(f"agree={self.agree} must be between 0 and pairs={self.pairs}")


@dataclass(frozen=True, kw_only=True, slots=True)
class StabilityLadder(Serializable):
    """One parametrization's ladder: its target group and the proxies measured against it."""

    name: str  # the target group (with the parametrization when the study has several)
    parametrization: str
    target: str
    shapes: tuple[str, ...]  # the target's shapes, by label
    proxies: tuple[str, ...]  # the proxies' groups, horizons first, then scales from the largest
    summary: str  # one sentence: the cheapest proxy at DataDecide's 80% or better, or that none reaches it


@dataclass(frozen=True, kw_only=True, slots=True)
class Stability(Serializable):
    ladders: tuple[StabilityLadder, ...]
    agreements: tuple[ProxyAgreement, ...]
    left_out: tuple[str, ...] = ()  # result keys ("group/shape") that did not pass `learned`
    notes: tuple[str, ...] = field(default=(), metadata=hook(followed_by=("lines",)))

    @property
    def lines(self) -> tuple[str, ...]:
        """Per ladder, each proxy's sentence and the ladder's summary; then the notes."""
        out: list[str] = []
        for ladder in self.ladders:
            out += [a.line for a in self.agreements if a.ladder == ladder.name]
            out.append(ladder.summary)
        return (*out, *self.notes)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Group:
    label: str
    base: str  # the full-horizon group it belongs to
    fraction: float  # of the full horizon (1.0 for a full-horizon group)
    scale: float  # mean non-embedding parameters
    results: tuple  # ShapeResult, one per shape


def stability(
    results: Sequence,
    *,
    learned: Callable[[object], bool] | None = None,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
) -> Stability:
    """The decision accuracy of every proxy of every ladder among `results` (`ShapeResult`s; those without seed
    losses are not finished and are skipped). `learned(result)` False leaves a result out (default: all count)."""
    if not isinstance(n_bootstrap, int) or n_bootstrap < 1:
        raise UserError(f"n_bootstrap={n_bootstrap!r} must be a whole number >= 1")
    if not 0.0 < level < 1.0:
        raise UserError(f"level={level!r} must be between 0 and 1 (exclusive), e.g. 0.95")
    finished = [r for r in results if r.seed_losses]
    left_out = tuple(r.key for r in finished if learned is not None and not learned(r))
    kept = [r for r in finished if learned is None or learned(r)]
    if not kept:
        why = (f"none of the {len(finished)} finished results learned (all left out)" if finished
               else "no finished result")
        return Stability(ladders=(), agreements=(), left_out=left_out, notes=(f"no verdict stability: {why}",))
    by_param: dict[str, dict[str, list]] = {}
    for r in kept:
        by_param.setdefault(r.parametrization, {}).setdefault(r.group, []).append(r)
    several = len(by_param) > 1
    ladders, agreements, notes = [], [], []
    for param, groups in sorted(by_param.items()):
        built = _ladder(param, groups, several=several, n_bootstrap=n_bootstrap, level=level, seed=seed)
        if isinstance(built, str):
            notes.append(built)
            continue
        ladder, found = built
        ladders.append(ladder)
        agreements += found
    if left_out:
        notes.append(f"left out as not learned: {', '.join(left_out)}")
    return Stability(ladders=tuple(ladders), agreements=tuple(agreements), left_out=left_out, notes=tuple(notes))


def _ladder(param: str, groups: dict[str, list], *, several: bool, n_bootstrap: int, level: float, seed: int):
    """(StabilityLadder, agreements) of one parametrization's groups, or a note saying why there is none."""
    made = []
    for label, rs in groups.items():
        split = split_horizon(label)
        base, fraction = split if split is not None else (label, 1.0)
        made.append(_Group(label=label, base=base, fraction=fraction,
                           scale=statistics.fmean(r.non_embedding_params for r in rs),
                           results=tuple(sorted(rs, key=lambda r: r.shape_label))))
    full = [g for g in made if g.fraction == 1.0]
    where = f" ({param})" if several else ""
    if not full:
        return f"no verdict stability{where}: no full-horizon group finished"
    target = max(full, key=lambda g: (g.scale, max(r.tokens or 0 for r in g.results), g.label))
    name = target.label + where
    horizons = sorted((g for g in made if g.base == target.label and g is not target), key=lambda g: -g.fraction)
    scales = sorted((g for g in made if g.base != target.label and g.scale < target.scale),
                    key=lambda g: (-g.scale, g.base, -g.fraction))
    if not horizons and not scales:
        return (f"no verdict stability{where}: {target.label} has no cheaper proxy (a shorter horizon "
                "or a smaller scale) to compare its ranking with")
    found = [_agreement(name, target, g, "horizon", n_bootstrap=n_bootstrap, level=level, seed=seed)
             for g in horizons]
    found += [_agreement(name, target, g, "scale", n_bootstrap=n_bootstrap, level=level, seed=seed) for g in scales]
    ladder = StabilityLadder(name=name, parametrization=param, target=target.label,
                             shapes=tuple(r.shape_label for r in target.results),
                             proxies=tuple(a.proxy for a in found), summary=_summary(name, found))
    return ladder, found


def _matches(target: _Group, proxy: _Group, kind: str) -> list[tuple]:
    """(target result, proxy result) for every target shape with a match in the proxy."""
    if kind == "horizon":
        by_label = {r.shape_label: r for r in proxy.results}
        return [(t, by_label[t.shape_label]) for t in target.results if t.shape_label in by_label]
    out = []
    for t in target.results:
        family = family_of(t.aspect_ratio)
        same = [p for p in proxy.results if family_of(p.aspect_ratio) == family]
        if same:
            out.append((t, min(same, key=lambda p: (abs(math.log(p.aspect_ratio / t.aspect_ratio)), p.shape_label))))
    return out


def _agreement(ladder: str, target: _Group, proxy: _Group, kind: str, *, n_bootstrap: int, level: float,
               seed: int) -> ProxyAgreement:
    matched = _matches(target, proxy, kind)
    index = {id(t): i for i, (t, _) in enumerate(matched)}
    pairs = [(index[id(a)], index[id(b)]) for (a, pa), (b, pb) in itertools.combinations(matched, 2) if pa is not pb]
    t_losses = [t.seed_losses for t, _ in matched]
    p_losses = [p.seed_losses for _, p in matched]
    agree = _agreeing(pairs, [statistics.fmean(v) for v in t_losses], [statistics.fmean(v) for v in p_losses])
    accuracy = agree / len(pairs) if pairs else None
    low = high = None
    compared = [*(t for t, _ in matched), *{id(p): p for _, p in matched}.values()]  # each proxy shape once
    single = sorted({r.shape_label for r in compared if len(r.seed_losses) < 2})
    if pairs and not single:
        rng = random.Random(seed)
        draws = []
        for _ in range(n_bootstrap):
            t_mean = [statistics.fmean(rng.choices(v, k=len(v))) for v in t_losses]
            p_mean = [statistics.fmean(rng.choices(v, k=len(v))) for v in p_losses]
            draws.append(_agreeing(pairs, t_mean, p_mean) / len(pairs))
        low, high = _percentile(draws, (1 - level) / 2), _percentile(draws, (1 + level) / 2)
    proxy_compute = _compute(compared[len(matched):])
    target_compute = _compute(compared[:len(matched)])
    fraction = proxy_compute / target_compute if proxy_compute is not None and target_compute else None
    one_seed = None if not single else ("one seed per shape" if all(len(r.seed_losses) < 2 for r in compared)
                                        else f"{', '.join(single)} ha{'s' if len(single) == 1 else 've'} one seed")
    line = _line(ladder, target, proxy, kind, len(pairs), agree, accuracy, low, high, fraction, one_seed, level)
    return ProxyAgreement(ladder=ladder, proxy=proxy.label, kind=kind, fraction_of_target_compute=fraction,
                          pairs=len(pairs), agree=agree, accuracy=accuracy, low=low, high=high, line=line,
                          matched=tuple((t.shape_label, p.shape_label) for t, p in matched))


def _agreeing(pairs, target: list[float], proxy: list[float]) -> int:
    """Pairs ordered the same way at both; a tie at either counts as a disagreement."""
    return sum(1 for i, j in pairs if (target[i] - target[j]) * (proxy[i] - proxy[j]) > 0)


def _compute(results) -> float | None:
    total = 0.0
    for r in results:
        if not r.tokens:
            return None
        total += float(r.tokens) * float(r.train_flops_per_token)
    return total


def _percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default "linear" method)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _line(ladder, target, proxy, kind, pairs, agree, accuracy, low, high, fraction, one_seed, level) -> str:
    at = f"at {proxy.fraction:g} of the tokens" if kind == "horizon" else f"at {proxy.label}"
    versus = "the full run" if kind == "horizon" else target.label
    if not pairs:
        where = ("are in both" if kind == "horizon"
                 else f"have a distinct match of their aspect-ratio family in {proxy.label}")
        return f"{ladder}: no pairs to compare the ranking {at} with {versus}: fewer than 2 of its shapes {where}"
    text = f"{ladder}: the ranking {at} agrees with {versus} on {agree} of {pairs} pair{'s' if pairs > 1 else ''}, "
    text += _pct(accuracy)
    if low is not None:
        text += f" [{_pct(low)}, {_pct(high)}]"
    elif one_seed:
        text += f" ({one_seed}: no interval)"
    if kind == "scale" and fraction is not None:
        text += f", at {_share(fraction)} of {target.label}'s compute"
    if low is not None and level != 0.95:
        text += f" ({level:.0%} interval)"
    return text


def _share(fraction: float) -> str:
    return f"{100 * fraction:.2g}%" if fraction < 0.1 else f"{100 * fraction:.0f}%"


def _summary(name: str, found: list[ProxyAgreement]) -> str:
    ok = [a for a in found if a.accuracy is not None and a.accuracy >= DATADECIDE_ACCURACY
          and a.fraction_of_target_compute is not None]
    if not ok:
        measured = [a for a in found if a.accuracy is not None]
        if not measured:
            return f"{name}: no proxy has two comparable shapes"
        best = max(measured, key=lambda a: (a.accuracy, -(a.fraction_of_target_compute or 0.0)))
        return (f"{name}: no proxy orders {_pct(DATADECIDE_ACCURACY)} of the pairs as the target does (DataDecide's "
                f"small-scale proxies reach about that); the closest is {best.proxy} at {_pct(best.accuracy)}")
    best = min(ok, key=lambda a: (a.fraction_of_target_compute, -a.accuracy, a.proxy))
    return (f"{name}: the cheapest proxy ordering at least {_pct(DATADECIDE_ACCURACY)} of the pairs as the target "
            f"is {best.proxy} ({_pct(best.accuracy)} of {best.pairs} pairs at {_share(best.fraction_of_target_compute)} "
            "of the target's compute)")


__all__ = ["DATADECIDE_ACCURACY", "KINDS", "ProxyAgreement", "SOURCE", "Stability", "StabilityLadder", "stability"]
