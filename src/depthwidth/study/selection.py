"""Learning-rate selection: per shape (within its budget group), the trial whose validation loss, averaged
over the seeds, is lowest. A diverged trial counts as infinitely bad; a trial not finished yet makes the
choice provisional.

Protocol warning: when the best learning rate is the lowest or the highest of the shape's grid, the
optimum may lie outside it, so this shape's loss may be overstated next to shapes whose optimum was
bracketed - the comparison is then not fair until the grid is widened (with two trials per shape the best
is always at an edge: two trials can rank learning rates but cannot bracket an optimum).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass

from depthwidth.study.store import ResultRecord, RunRecord


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
    trials: tuple[Trial, ...]  # ascending lr
    best_lr: float | None
    best_loss: float | None
    best_run_ids: tuple[str, ...]
    complete: bool  # every trial finished
    edge: str | None  # "low" | "high" when the best lr is at that end of the grid
    warning: str | None

    @property
    def lr_losses(self) -> dict[float, float | None]:
        """Mean loss over seeds per learning rate tried, ascending (None: diverged, failed or unfinished)."""
        return {t.lr: t.mean_loss if t.mean_loss is not None and math.isfinite(t.mean_loss) else None
                for t in self.trials}

    def to_dict(self) -> dict:
        return asdict(self)


def select_lrs(runs: list[RunRecord], results: dict[str, ResultRecord]) -> tuple[LRChoice, ...]:
    """One choice per (group, shape), in the order the runs were created."""
    by_shape: dict[tuple[str, str], dict[float, list[RunRecord]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.kind == "train":
            by_shape[(run.group, run.shape_label)][run.lr].append(run)
    return tuple(_choose(group, label, trials, results) for (group, label), trials in by_shape.items())


def _choose(group: str, label: str, by_lr: dict[float, list[RunRecord]],
            results: dict[str, ResultRecord]) -> LRChoice:
    trials = []
    for lr in sorted(by_lr):
        runs = sorted(by_lr[lr], key=lambda r: r.seed or 0)
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
        trials.append(Trial(lr=lr, run_ids=tuple(r.run_id for r in runs), statuses=statuses, losses=tuple(losses),
                            mean_loss=mean))
    complete = all(t.mean_loss is not None for t in trials)
    scored = [(t.mean_loss, i) for i, t in enumerate(trials) if t.mean_loss is not None and math.isfinite(t.mean_loss)]
    if not scored:
        warning = ("every learning rate diverged" if complete and trials else None)
        return LRChoice(group=group, shape_label=label, trials=tuple(trials), best_lr=None, best_loss=None,
                        best_run_ids=(), complete=complete, edge=None, warning=warning)
    best_loss, best = min(scored)
    edge = None
    if len(trials) == 1:
        warning = "a single learning rate: nothing was tuned"
    elif best in (0, len(trials) - 1):
        edge = "low" if best == 0 else "high"
        grid = ", ".join(f"{t.lr:.3g}" for t in trials)
        warning = (f"best lr {trials[best].lr:.3g} is the {'lowest' if best == 0 else 'highest'} of its grid "
                   f"[{grid}]: the optimum may lie outside it, so this shape may be under-tuned")
    else:
        warning = None
    if not complete and warning is None:
        warning = "provisional: not every trial has finished"
    return LRChoice(group=group, shape_label=label, trials=tuple(trials), best_lr=trials[best].lr,
                    best_loss=best_loss, best_run_ids=trials[best].run_ids, complete=complete, edge=edge,
                    warning=warning)


__all__ = ["LRChoice", "Trial", "select_lrs"]
