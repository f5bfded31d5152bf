"""The learning-rate search of a study, as pure functions of the trials that have finished.

Three modes, one per budget group (`group_mode`):

- "grid": every shape tries the same grid (or the same factors of a grid centred per width); nothing
  adapts. The best trial is at an edge whenever the optimum lies outside the grid.
- "bracket" (`[lr] search = "bracket"`): each shape starts from its initial grid and takes one step at a
  time, each step one learning rate trained with every seed, until `max_trials` learning rates (the same
  budget for every shape) have been tried:
    1. while the best trial is the lowest or the highest learning rate tried, the next one is one `step`
       (a ratio, default that of the initial grid) beyond that edge: the grid grows towards the optimum;
    2. once the best lies inside, refine: the vertex of the parabola through the best trial and its two
       neighbours in log learning rate, unless it falls within `MIN_SEPARATION` (a fraction of a log
       step) of a learning rate already tried; then the geometric midpoint of the wider gap next to the
       best (always a new value, so every shape spends the whole budget).
  The selected learning rate is the best trial (it was trained); the interpolated optimum is the vertex
  of the parabola through the best and its neighbours (reported, not trained); the optimum is
  "bracketed" when the best trial has a tried neighbour on each side. A shape whose best is still at an
  edge when the budget is spent is not bracketed: a protocol warning.
- "transfer" (`[lr] transfer_from = "<shape label>"`, groups under mup, completep or depth-mup): only the
  proxy shape is searched (as above, or on the grid); every shape of the group, the proxy included, then
  trains at the proxy's selected learning rate with `final_seeds`, the seeds the saved trials pay for.

Determinism: a step is taken only when every trial of the shape has finished (completed or diverged;
a diverged trial counts as infinitely bad), and the next learning rate is a function of those results
alone, rounded to `SIGNIFICANT` digits. A study that is killed and resumed proposes exactly the same
trials, and reuses every finished one (a trial is a run, identified by its config hash).
"""

from __future__ import annotations

import dataclasses

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from depthwidth.artifact.config import LIMITS as RUN_LIMITS

#: what `[lr] search` may say: how a searched shape is tuned
SEARCHES = ("grid", "bracket")
MODES = (*SEARCHES, "transfer")
#: parametrizations under which a learning rate tuned on one shape may be reused for the others
TRANSFERS = ("mup", "completep", "depth-mup")
#: learning rates proposed by the search are rounded to this many significant digits
SIGNIFICANT = 4
#: a parabola vertex closer than this (in units of log(step)) to a tried learning rate is not tried
MIN_SEPARATION = 0.2
#: `transfer_from` value that picks the shape with the fewest parameters
SMALLEST = "smallest"
#: the search proposes no learning rate outside this range (beyond it, the search ends unbracketed); the top
#: is the largest learning rate a run may have (`artifact.config.LIMITS["lr"]`)
LR_RANGE = (1e-7, RUN_LIMITS["lr"][0])


def round_lr(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}")


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchPlan:
    """The search of one shape: its initial learning rates, the trial budget and the extension step."""

    initial: tuple[float, ...]  # ascending
    max_trials: int
    step: float  # ratio between an edge and the next learning rate beyond it (> 1)

    def __post_init__(self) -> None:
        if not self.initial:
            raise ValueError("initial: a search needs at least one learning rate to start from")
        if self.max_trials < len(self.initial):
            raise ValueError(f"max_trials={self.max_trials} is below the {len(self.initial)} initial learning rates")
        if not self.step > 1.0:
            raise ValueError(f"step={self.step!r} must be a ratio above 1")


def default_step(initial: Sequence[float]) -> float:
    """The mean ratio between neighbouring initial learning rates (2 for a single one)."""
    values = sorted(initial)
    if len(values) < 2:
        return 2.0
    return (values[-1] / values[0]) ** (1.0 / (len(values) - 1))


def _best(losses: Mapping[float, float]) -> int:
    """Index (in ascending learning rate) of the lowest loss; ties go to the lower learning rate;
    when every trial diverged, the lowest learning rate."""
    lrs = sorted(losses)
    return min(range(len(lrs)), key=lambda i: (losses[lrs[i]], i))


def parabola_vertex(points: Sequence[tuple[float, float]]) -> float | None:
    """x of the vertex of the parabola through three (x, y) points, when it opens upwards (None when the
    points are collinear, not finite, or the parabola opens downwards)."""
    (x0, y0), (x1, y1), (x2, y2) = points
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1, x2, y2)):
        return None
    # y = a x^2 + b x + c through the three points (Lagrange form, divided differences)
    d01, d12 = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    a = (d12 - d01) / (x2 - x0)
    if not a > 0:
        return None
    b = d01 - a * (x0 + x1)
    return -b / (2 * a)


@dataclass(frozen=True, kw_only=True, slots=True)
class Assessment:
    """What a shape's finished trials say about its optimum."""

    best_lr: float | None  # the tried learning rate with the lowest loss (None: no trial)
    best_loss: float | None  # inf when every trial diverged
    optimum_lr: float | None  # vertex of the parabola through the best and its neighbours (log LR)
    bracketed: bool  # the best trial has a tried learning rate on each side
    edge: str | None  # "low" | "high": the best is the lowest / highest tried (with more than one trial)


def assess(losses: Mapping[float, float]) -> Assessment:
    """`losses`: learning rate -> mean final loss over seeds (inf: diverged) of the finished trials."""
    if not losses:
        return Assessment(best_lr=None, best_loss=None, optimum_lr=None, bracketed=False, edge=None)
    lrs = sorted(losses)
    i = _best(losses)
    bracketed = 0 < i < len(lrs) - 1
    edge = None if bracketed or len(lrs) == 1 else ("low" if i == 0 else "high")
    optimum = None
    if bracketed:
        x = parabola_vertex([(math.log(lrs[j]), losses[lrs[j]]) for j in (i - 1, i, i + 1)])
        optimum = None if x is None else round_lr(math.exp(x))
    return Assessment(best_lr=lrs[i], best_loss=losses[lrs[i]], optimum_lr=optimum, bracketed=bracketed, edge=edge)


def next_lr(plan: SearchPlan, losses: Mapping[float, float]) -> float | None:
    """The next learning rate to try given every finished trial (`losses`, learning rate -> mean loss,
    inf for diverged), or None when the budget is spent (or when the next step would leave `LR_RANGE` or,
    rounded, repeat a tried value: the search ends there). The initial learning rates come first."""
    for lr in plan.initial:
        if lr not in losses:
            return lr
    nxt = _proposal(plan, losses)
    if nxt is None or nxt in losses or not LR_RANGE[0] <= nxt <= LR_RANGE[1]:
        return None
    return nxt


def _proposal(plan: SearchPlan, losses: Mapping[float, float]) -> float | None:
    for lr in plan.initial:
        if lr not in losses:
            return lr
    if len(losses) >= plan.max_trials:
        return None
    lrs = sorted(losses)
    i = _best(losses)
    if i == 0:  # also when every trial diverged, or a single one was tried
        return round_lr(lrs[0] / plan.step)
    if i == len(lrs) - 1:
        return round_lr(lrs[-1] * plan.step)
    logs = [math.log(v) for v in lrs]
    x = parabola_vertex([(logs[j], losses[lrs[j]]) for j in (i - 1, i, i + 1)])
    min_gap = MIN_SEPARATION * math.log(plan.step)
    if x is not None and all(abs(x - v) >= min_gap for v in logs):
        candidate = round_lr(math.exp(x))
        if candidate not in losses:
            return candidate
    # the wider of the two gaps next to the best, halved in log LR (ties: the lower gap)
    lo_gap, hi_gap = logs[i] - logs[i - 1], logs[i + 1] - logs[i]
    j = i - 1 if lo_gap >= hi_gap else i + 1
    candidate = round_lr(math.exp(0.5 * (logs[i] + logs[j])))
    return candidate if candidate not in losses else None  # only when rounding makes them equal


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupMode:
    """How the learning rates of one budget group are chosen."""

    kind: str  # one of MODES
    search: str  # "grid" | "bracket": how a searched shape (every shape, or the proxy) is tuned
    max_trials: int  # learning rates a searched shape may try (the grid's size for "grid")
    seeds: tuple[int, ...]  # seeds of every search trial
    final_seeds: tuple[int, ...]  # seeds trained at the selected learning rate
    proxy: str | None = None  # "transfer": the shape label whose optimum every shape reuses
    parametrization: str = "sp"
    proxy_group: str | None = None  # "transfer" from another budget group (a proxy at another scale); None: own

    def describe(self) -> str:
        how = (f"bracketed per shape within {self.max_trials} trials" if self.search == "bracket"
               else f"the same {self.max_trials}-point grid")
        if self.kind == "transfer":
            where = f" of the group {self.proxy_group!r}" if self.proxy_group else ""
            return (f"tuned on {self.proxy}{where} ({how}), its best learning rate reused for every shape under "
                    f"{self.parametrization}, {len(self.final_seeds)} seed(s) each")
        return f"{how} for every shape, {len(self.seeds)} seed(s) each"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "search": self.search, "max_trials": self.max_trials, "seeds": list(self.seeds),
                "final_seeds": list(self.final_seeds), "proxy": self.proxy, "parametrization": self.parametrization,
                "proxy_group": self.proxy_group, "description": self.describe()}


def transfer_seeds(seeds: Sequence[int], count: int) -> tuple[int, ...]:
    """The study's seeds, then the next unused integers, `count` in all (count >= len(seeds))."""
    out = list(sorted(seeds))
    nxt = (max(out) + 1) if out else 0
    while len(out) < count:
        out.append(nxt)
        nxt += 1
    return tuple(out[:max(count, len(seeds))])


def resolve_proxy(transfer_from: str, shapes: Mapping[str, int]) -> str | None:
    """The proxy's label among `shapes` (label -> total parameters): the label itself, or the shape with
    the fewest parameters for "smallest"; None when the label is not a shape of the group."""
    if transfer_from == SMALLEST:
        return min(shapes, key=lambda label: (shapes[label], label)) if shapes else None
    return transfer_from if transfer_from in shapes else None


def group_mode(lr, *, seeds: Sequence[int], parametrization: str, shapes: Mapping[str, int]) -> GroupMode:
    """The mode of a group from the spec's [lr] section (`lr`: an `LRSpec`), the study's seeds, the
    group's parametrization and its shapes (label -> total parameters, for "smallest")."""
    search = lr.search
    budget = lr.max_trials if search == "bracket" else lr.trials
    seeds = tuple(sorted(seeds))
    if lr.transfer_from is not None and parametrization in TRANSFERS:
        proxy = resolve_proxy(lr.transfer_from, shapes)
        finals = transfer_seeds(seeds, lr.transfer_seeds or budget * len(seeds))
        return GroupMode(kind="transfer", search=search, max_trials=budget, seeds=seeds, final_seeds=finals,
                         proxy=proxy, parametrization=parametrization)
    return GroupMode(kind=search, search=search, max_trials=budget, seeds=seeds, final_seeds=seeds,
                     parametrization=parametrization)


def across_groups(modes: Mapping[str, GroupMode], shapes: Mapping[str, Mapping[str, int]],
                  transfer_from: str | None) -> dict[str, GroupMode]:
    """`modes` with each transfer group that lacks the named proxy shape pointed at the first group that has
    it under the same parametrization (`proxy_group`): one small proxy tunes the learning rate of every scale.
    A group whose proxy is found nowhere keeps `proxy` None (the caller's error)."""
    out = dict(modes)
    if transfer_from is None or transfer_from == SMALLEST:
        return out
    for label, mode in modes.items():
        if mode.kind != "transfer" or mode.proxy is not None:
            continue
        home = next((g for g, m in modes.items() if m.kind == "transfer" and m.proxy == transfer_from
                     and m.proxy_group is None and m.parametrization == mode.parametrization
                     and transfer_from in shapes.get(g, {})), None)
        if home is not None:
            out[label] = dataclasses.replace(mode, proxy=transfer_from, proxy_group=home)
    return out


def search_plan(lr, *, d_model: int) -> SearchPlan:
    """The bracket search of one shape of width `d_model` from the spec's [lr] section."""
    initial = lr.values(d_model)
    return SearchPlan(initial=initial, max_trials=lr.max_trials, step=lr.step or default_step(initial))


__all__ = ["Assessment", "GroupMode", "across_groups", "LR_RANGE", "MODES", "SEARCHES", "SMALLEST", "SearchPlan", "TRANSFERS", "assess", "default_step",
           "group_mode", "next_lr", "parabola_vertex", "resolve_proxy", "round_lr", "search_plan", "transfer_seeds"]
