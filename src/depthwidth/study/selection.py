"""Learning-rate selection: per shape (within its budget group), the trial whose validation loss, averaged
over the seeds, is lowest. A diverged trial counts as infinitely bad; a trial not finished yet makes the
choice provisional. How the trials came about is the group's mode (`depthwidth.study.lr_search`):

- grid: the same grid for every shape;
- bracket: each shape's own search within the shared `max_trials`; the choice also carries the
  interpolated optimum (parabola in log LR through the best and its neighbours) and whether the optimum
  was bracketed;
- transfer: the proxy shape's search (at the study's seeds) picks the learning rate; every shape is
  then trained at it with the transfer seeds, and those runs are the shape's result.

Protocol warning: when the best learning rate is the lowest or the highest tried, the optimum may lie
outside, so this shape's loss may be overstated next to shapes whose optimum was bracketed - the
comparison is then not fair until the grid is widened or the search budget raised (with two trials per
shape the best is always at an edge: two trials can rank learning rates but cannot bracket an optimum).
A bracket search reports it only once its budget is spent (before, the choice is provisional).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass

from depthwidth.study.horizons import split_horizon
from depthwidth.study.lr_search import GroupMode, assess, next_lr, search_plan
from depthwidth.study.store import ResultRecord, RunRecord
from depthwidth.study.verify import is_verify


@dataclass(frozen=True, kw_only=True, slots=True)
class Trial:
    lr: float
    run_ids: tuple[str, ...]  # one per seed
    statuses: tuple[str, ...]
    losses: tuple[float | None, ...]  # final validation loss per seed (None: diverged or not finished)
    mean_loss: float | None  # over seeds; inf when a seed diverged; None until every seed finished

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class LRChoice:
    group: str
    shape_label: str
    trials: tuple[Trial, ...]  # ascending lr (transfer proxy: its search trials, at the study's seeds)
    best_lr: float | None
    best_loss: float | None
    best_run_ids: tuple[str, ...]  # the runs at best_lr whose losses are the shape's result
    complete: bool  # every trial finished
    edge: str | None  # "low" | "high" when the best lr is at that end of the tried learning rates
    warning: str | None
    mode: str = "grid"  # "grid" | "bracket" | "transfer" (see depthwidth.study.lr_search)
    optimum_lr: float | None = None  # interpolated optimum (parabola in log LR), when bracketed
    bracketed: bool | None = None  # the best has a tried LR on each side (None: not searched here)
    transfer_from: str | None = None  # "transfer": the proxy shape whose best LR this shape reuses
    max_trials: int | None = None  # the search budget every shape of the group shares
    search_done: bool = True  # the search will try no more learning rates
    chosen_at: str | None = None  # a horizon group (`study.horizons`): the group whose choice of LR it reuses

    @property
    def lr_losses(self) -> dict[float, float | None]:
        """Mean loss over seeds per learning rate tried, ascending (None: diverged, failed or unfinished)."""
        return {t.lr: t.mean_loss if t.mean_loss is not None and math.isfinite(t.mean_loss) else None
                for t in self.trials}

    def to_dict(self) -> dict:
        return asdict(self)


def select_lrs(runs: list[RunRecord], results: dict[str, ResultRecord], *, modes: dict[str, GroupMode] | None = None,
               lr=None) -> tuple[LRChoice, ...]:
    """One choice per (group, shape), in the order the runs were created. `modes` (group -> GroupMode)
    and `lr` (the spec's `LRSpec`, for the bracket searches' budgets) default to the grid of every shape."""
    by_shape: dict[tuple[str, str], dict[float, list[RunRecord]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.kind == "train" and not is_verify(run):  # a transfer check is not a trial (study.verify)
            by_shape[(run.group, run.shape_label)][run.lr].append(run)
    modes = modes or {}
    proxies = {}
    for (group, label), by_lr in by_shape.items():
        mode = modes.get(group)
        if mode is not None and mode.kind == "transfer" and label == mode.proxy and mode.proxy_group is None:
            proxies[group] = _choose(group, label, by_lr, results, mode=mode, lr=lr)
    out = []
    for (group, label), by_lr in by_shape.items():
        mode = modes.get(group)
        if split_horizon(group) is not None:
            continue  # below: at the learning rate chosen at the full horizon
        if mode is not None and mode.kind == "transfer":
            if label == mode.proxy and mode.proxy_group is None:
                out.append(proxies[group])
            else:  # the proxy's choice: of this group, or of the group at another scale that holds it
                out.append(_transferred(group, label, by_lr, results, mode=mode,
                                        proxy=proxies.get(mode.proxy_group or group)))
        else:
            out.append(_choose(group, label, by_lr, results, mode=mode, lr=lr))
    full = {(c.group, c.shape_label): c for c in out}
    seed_of = {r.run_id: r.seed for r in runs}
    for (group, label), by_lr in by_shape.items():
        horizon = split_horizon(group)
        if horizon is not None:
            chosen = full.get((horizon[0], label))
            seeds = {seed_of[i] for i in chosen.best_run_ids} if chosen is not None else set()
            out.append(_at_horizon(group, label, by_lr, results, chosen=chosen, seeds=seeds))
    order = list(by_shape)
    return tuple(sorted(out, key=lambda c: order.index((c.group, c.shape_label))))


def _at_horizon(group: str, label: str, by_lr: dict[float, list[RunRecord]], results: dict[str, ResultRecord], *,
                chosen: LRChoice | None, seeds: set) -> LRChoice:
    """A shape at an earlier horizon (`depthwidth.study.horizons`): its cooldown branches at the learning rate
    chosen at the full horizon, with the seeds of that choice; the other trials are listed, not chosen."""
    trials = tuple(_trial(v, by_lr[v], results) for v in sorted(by_lr))
    common = {"group": group, "shape_label": label, "trials": trials,
              "complete": all(t.mean_loss is not None for t in trials)}
    if chosen is None or chosen.best_lr is None or chosen.best_lr not in by_lr:
        return LRChoice(**common, best_lr=None, best_loss=None, best_run_ids=(), edge=None,
                        warning="no learning rate chosen at the full horizon yet")
    runs = sorted((r for r in by_lr[chosen.best_lr] if r.seed in seeds), key=lambda r: r.seed or 0)
    trial = _trial(chosen.best_lr, runs, results)
    ok = trial.mean_loss is not None and math.isfinite(trial.mean_loss)
    warning = None  # the choice's own warnings are its full horizon's (stated once, there)
    if trial.mean_loss is None:
        warning = "provisional: not every seed has finished"
    return LRChoice(**common, best_lr=chosen.best_lr, best_loss=trial.mean_loss if ok else None,
                    best_run_ids=trial.run_ids if ok else (), edge=chosen.edge, warning=warning, mode=chosen.mode,
                    optimum_lr=chosen.optimum_lr, bracketed=chosen.bracketed, transfer_from=chosen.transfer_from,
                    max_trials=chosen.max_trials, search_done=chosen.search_done, chosen_at=chosen.group)


def _trial(lr: float, runs: list[RunRecord], results: dict[str, ResultRecord]) -> Trial:
    runs = sorted(runs, key=lambda r: r.seed or 0)
    losses = []
    for run in runs:
        res = results.get(run.run_id)
        ok = run.status == "completed" and res is not None and res.val_loss is not None
        losses.append(res.val_loss if ok else None)
    statuses = tuple(r.status for r in runs)
    if any(s == "diverged" for s in statuses):
        mean = math.inf
    elif all(v is not None for v in losses):
        mean = sum(losses) / len(losses)
    else:
        mean = None
    return Trial(lr=lr, run_ids=tuple(r.run_id for r in runs), statuses=statuses, losses=tuple(losses),
                 mean_loss=mean)


def _choose(group: str, label: str, by_lr: dict[float, list[RunRecord]], results: dict[str, ResultRecord], *,
            mode: GroupMode | None, lr) -> LRChoice:
    kind = mode.kind if mode is not None else "grid"
    search_seeds = set(mode.seeds) if mode is not None and kind == "transfer" else None
    trials = []
    for value in sorted(by_lr):
        runs = [r for r in by_lr[value] if search_seeds is None or r.seed in search_seeds]
        if runs:
            trials.append(_trial(value, runs, results))
    complete = all(t.mean_loss is not None for t in trials)
    searched = mode is not None and mode.search == "bracket" and lr is not None
    done = True
    if searched and complete:
        d_model = next(iter(by_lr.values()))[0].config["shape"]["d_model"]
        done = next_lr(search_plan(lr, d_model=d_model), {t.lr: t.mean_loss for t in trials}) is None
    elif searched:
        done = False
    common = {"group": group, "shape_label": label, "trials": tuple(trials), "complete": complete, "mode": kind,
              "max_trials": mode.max_trials if mode is not None else len(trials), "search_done": done}
    scored = {t.lr: t.mean_loss for t in trials if t.mean_loss is not None and math.isfinite(t.mean_loss)}
    if not scored:
        warning = ("every learning rate diverged" if complete and trials else None)
        return LRChoice(**common, best_lr=None, best_loss=None, best_run_ids=(), edge=None, warning=warning)
    finished = {t.lr: t.mean_loss for t in trials if t.mean_loss is not None}
    a = assess(finished)
    best = next(t for t in trials if t.lr == a.best_lr)
    grid = ", ".join(f"{t.lr:.3g}" for t in trials)
    if len(trials) == 1:
        warning = "a single learning rate: nothing was tuned"
    elif a.edge is not None and (not searched or done):
        side = "lowest" if a.edge == "low" else "highest"
        if searched:
            warning = (f"best lr {a.best_lr:.3g} is the {side} of the learning rates its search tried [{grid}] "
                       f"within max_trials={mode.max_trials}: the optimum was not bracketed, so this shape may "
                       "be under-tuned")
        else:
            warning = (f"best lr {a.best_lr:.3g} is the {side} of its grid [{grid}]: the optimum may lie outside "
                       "it, so this shape may be under-tuned")
    else:
        warning = None
    if warning is None and not done:
        warning = f"provisional: the learning-rate search has tried {len(trials)} of {mode.max_trials} learning rates"
    if warning is None and not complete:
        warning = "provisional: not every trial has finished"
    final = best.run_ids
    if kind == "transfer":  # the proxy's result: its runs at the chosen LR with the transfer seeds
        final = tuple(r.run_id for r in sorted(by_lr[a.best_lr], key=lambda r: r.seed or 0)
                      if r.seed in set(mode.final_seeds))
    return LRChoice(**common, best_lr=a.best_lr, best_loss=best.mean_loss, best_run_ids=final,
                    edge=a.edge, warning=warning, optimum_lr=a.optimum_lr,
                    bracketed=a.bracketed if len(trials) > 1 else False)


def _transferred(group: str, label: str, by_lr: dict[float, list[RunRecord]], results: dict[str, ResultRecord], *,
                 mode: GroupMode, proxy: LRChoice | None) -> LRChoice:
    """A shape trained at the proxy's learning rate: one trial, the transfer seeds."""
    trials = tuple(_trial(v, by_lr[v], results) for v in sorted(by_lr))
    complete = all(t.mean_loss is not None for t in trials)
    t = trials[0]
    warning = None
    if len(trials) > 1:
        warning = f"trained at {len(trials)} learning rates, expected the one of {mode.proxy}"
    elif proxy is None or proxy.best_lr != t.lr:
        warning = f"its learning rate {t.lr:.3g} is not the best of {mode.proxy}'s search"
    elif proxy.bracketed is False:
        warning = f"its learning rate comes from {mode.proxy}, whose optimum was not bracketed"
    elif not complete:
        warning = "provisional: not every seed has finished"
    ok = t.mean_loss is not None and math.isfinite(t.mean_loss)
    return LRChoice(group=group, shape_label=label, trials=trials, best_lr=t.lr, best_loss=t.mean_loss if ok else None,
                    best_run_ids=t.run_ids if ok else (), complete=complete, edge=None, warning=warning,
                    mode="transfer", transfer_from=mode.proxy, max_trials=mode.max_trials,
                    optimum_lr=proxy.optimum_lr if proxy is not None else None, bracketed=None)


__all__ = ["LRChoice", "Trial", "select_lrs"]
