"""Checking a transferred learning rate where it matters most (`[lr] verify = N`).

Under a transfer parametrization (muP, CompleteP) one proxy shape tunes the learning rate and every other
shape, at every scale, reuses it (`depthwidth.study.lr_search`). That the optimum does not move with width
and depth is the parametrization's claim (Yang et al. 2022, arXiv 2203.03466; Dey et al. 2025, CompleteP,
arXiv 2505.01618), and a claim to check: with `verify = 2` the study also trains, at the largest scale, the
shallowest and the deepest shape at the transferred LR divided and multiplied by the search's step (with
`verify = 4` also by its square), at the seeds of the transferred runs. If either side is better by more than
the seed noise, the optimum has moved there and the report says so.

A verification run is an ordinary training run whose config also holds `"verify": {"of_lr", "factor"}`
(so its id is its own) and no `horizons` (it is judged at the full horizon only). It is not a result: the
summary takes verification runs out of the runs it selects, ranks and checks for fairness
(`split_runs`), and reports them next to the shape they check (`ShapeResult.lr_verify`).

`verify = "adapt"` acts on the check. It first trains exactly the runs of `verify = 2` (same ids). Once
they have finished, each checked shape gets a typed verdict (`check_transfer`); when one says the optimum
moved (a verification LR better by more than two standard errors; or the transferred LR diverged and a
verification LR did not), every shape of that group but the proxy gets a bracketed search of its own
(`depthwidth.study.lr_search` `next_lr`), with the same budget for each: `adapt_trials` learning rates
beyond those it has already trained (the transferred LR; for a checked shape its verification LRs too,
whose results are reused as trials), each trained with the transferred runs' seeds. A shape that has only
the transferred LR steps first in the direction the check found better. These re-tuning runs carry
`"verify": {"of_lr", "factor", "adapt": <adapt_trials>}`, so every other run keeps its id, and the
proposals are a function of the stored outcomes alone (a resumed study proposes the same runs). The summary
then takes, per re-tuned shape, the LR whose mean loss over the seeds is lowest (ties keep the transferred
one) as its result, and keeps the transferred result beside it (`ShapeResult.lr_transferred`,
`transferred_losses`, `lr_adapted`); the fairness check asks that every shape of a re-tuned group had the
same re-tuning budget (`adapt_trial_counts`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape

#: the run config's key that marks a verification run
VERIFY_KEY = "verify"
#: how many extra learning rates `[lr] verify` may ask for per checked shape
VERIFY_COUNTS = (0, 2, 4)
#: `[lr] verify = "adapt"`: the check of 2, then a re-tune of each group where the optimum moved
ADAPT = "adapt"
#: `[lr] adapt_trials`: its default, and its bound with the reason
ADAPT_TRIALS = 3
ADAPT_LIMIT = (16, "extra learning rates per re-tuned shape, each trained with every seed; a bracket next to a "
                   "moved optimum closes within 2 to 4")
#: what a verdict can say (`TransferCheck.state`)
CHECK_STATES = ("unfinished", "best", "unresolved", "noise", "moved")


def is_verify(run) -> bool:
    """Whether a stored run (`RunRecord`) or planned run (`expand.Run`) is a verification run."""
    config = getattr(run, "config", None)
    return isinstance(config, dict) and VERIFY_KEY in config


def split_runs(runs: Iterable) -> tuple[list, list]:
    """(the study's runs without verification runs, the verification runs)."""
    main, checks = [], []
    for r in runs:
        (checks if is_verify(r) else main).append(r)
    return main, checks


def factors(count: int, step: float) -> tuple[float, ...]:
    """The multipliers of the transferred LR that `verify = count` tries: step**-k and step**k, k = 1..count/2."""
    half = count // 2
    return tuple(step ** -k for k in range(half, 0, -1)) + tuple(step ** k for k in range(1, half + 1))


def targets(groups, modes: Mapping) -> dict[str, tuple[Shape, ...]]:
    """group label -> the shapes to verify: in the transfer groups of the largest scale (most parameters of
    any member; horizon groups excluded), the shallowest and the deepest shape that is not the proxy itself."""
    candidates = [g for g in groups if g.horizon is None and modes[g.label].kind == "transfer" and g.shapes]
    if not candidates:
        return {}
    size = {g.label: max(count_params(s).total for s in g.shapes) for g in candidates}
    largest = max(size.values())
    out = {}
    for g in candidates:
        if size[g.label] != largest:
            continue
        mode = modes[g.label]
        shapes = [s for s in g.shapes if not (mode.proxy_group is None and s.label() == mode.proxy)]
        if not shapes:
            continue
        ends = [min(shapes, key=lambda s: (s.n_layers, -s.d_model)), max(shapes, key=lambda s: (s.n_layers, -s.d_model))]
        out[g.label] = tuple(dict.fromkeys(ends))  # one shape when the group has one left
    return out


def verify_config(config: dict, *, of_lr: float, factor: float) -> dict:
    """A transferred run's config turned into the config of its verification run at `of_lr * factor`
    (the caller built `config` at that LR); horizons dropped."""
    out = dict(config)
    out["train"] = {k: v for k, v in config["train"].items() if k != "horizons"}
    out[VERIFY_KEY] = {"of_lr": of_lr, "factor": float(f"{factor:.6g}")}
    return out


def verification_losses(checks: list, results: Mapping) -> dict[tuple[str, str], dict[float, list[float | None]]]:
    """(group, shape label) -> lr -> the final validation losses of its verification runs, seed order
    (None: not finished or diverged)."""
    out: dict[tuple[str, str], dict[float, list]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(checks, key=lambda r: (r.lr, r.seed or 0)):
        res = results.get(r.run_id)
        ok = r.status == "completed" and res is not None and res.val_loss is not None
        out[(r.group, r.shape_label)][r.lr].append(res.val_loss if ok else None)
    return {k: dict(v) for k, v in out.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class TransferCheck:
    """What a checked shape's verification runs say about its transferred learning rate."""

    chosen_lr: float  # the transferred LR
    state: str  # one of CHECK_STATES
    best_lr: float | None = None  # the best verification LR (None: none finished)
    gain: float | None = None  # nats its seed mean is below the transferred one's (> 0: better)
    se: float | None = None  # standard error of that difference (None: one seed)

    def __post_init__(self) -> None:
        if self.state not in CHECK_STATES:
            raise ValueError(f"state={self.state!r}: expected one of {', '.join(CHECK_STATES)}")

    @property
    def moved(self) -> bool:
        """The optimum moved: a verification LR is better by more than two standard errors."""
        return self.state == "moved"

    @property
    def direction(self) -> str | None:
        """"lower" | "higher": where the best verification LR lies (None: none finished)."""
        if self.best_lr is None:
            return None
        return "lower" if self.best_lr < self.chosen_lr else "higher"

    def words(self) -> str:
        lr, best, where = self.chosen_lr, self.best_lr, self.direction
        if self.state == "unfinished":
            return "verification runs not finished"
        if self.state == "best":
            return f"the transferred LR {lr:.3g} is the best of those tried"
        if self.state == "unresolved":
            return (f"LR {best:.3g} ({where}) is {self.gain:.3f} nats better than the transferred {lr:.3g}; "
                    "one seed, so not resolved against noise")
        if self.state == "moved":
            return (f"the optimum moved: LR {best:.3g} ({where}) is {self.gain:.3f} nats better than the transferred "
                    f"{lr:.3g} (> 2 standard errors, {self.se:.3f})")
        return (f"LR {best:.3g} ({where}) is {self.gain:.3f} nats better than the transferred {lr:.3g}, within "
                f"2 standard errors ({self.se:.3f}): the transfer holds within noise")


def check_transfer(chosen_lr: float, chosen: list[float], trials: Mapping[float, list[float | None]]) -> TransferCheck:
    """Whether a verification LR beat the transferred one by more than two standard errors of the difference
    of the seed means (seed spread pooled; one seed: by any margin, said as unresolved). `chosen`: the
    transferred runs' losses; `trials`: LR -> the verification runs' losses (None: unfinished or diverged)."""
    done = {lr: v for lr, v in trials.items() if v and all(x is not None for x in v)}
    if not chosen or not done:
        return TransferCheck(chosen_lr=chosen_lr, state="unfinished")
    base = statistics.mean(chosen)
    best_lr = min(done, key=lambda lr: statistics.mean(done[lr]))
    gain = base - statistics.mean(done[best_lr])
    spreads = [statistics.variance(v) for v in (chosen, done[best_lr]) if len(v) > 1]
    common = {"chosen_lr": chosen_lr, "best_lr": best_lr, "gain": gain}
    if gain <= 0:
        return TransferCheck(**common, state="best")
    if not spreads:
        return TransferCheck(**common, state="unresolved")
    se = math.sqrt(statistics.mean(spreads) * (1 / len(chosen) + 1 / len(done[best_lr])))
    return TransferCheck(**common, se=se, state="moved" if gain > 2 * se else "noise")


def verdict(chosen_lr: float, chosen: list[float], trials: Mapping[float, list[float | None]]) -> str:
    """`check_transfer` in words."""
    return check_transfer(chosen_lr, chosen, trials).words()


def is_adapt(run) -> bool:
    """Whether a stored or planned run is a re-tuning run of `verify = "adapt"` (a verification run too)."""
    return is_verify(run) and bool(run.config[VERIFY_KEY].get("adapt"))


def adapt_config(config: dict, *, of_lr: float, lr: float, trials: int) -> dict:
    """A transferred run's config turned into the config of its re-tuning run at `lr` (the caller built
    `config` at that LR), the re-tuning budget `trials` recorded; horizons dropped."""
    out = verify_config(config, of_lr=of_lr, factor=lr / of_lr)
    out[VERIFY_KEY]["adapt"] = trials
    return out


def adapt_trial_counts(checks: Iterable) -> dict[str, dict[str, tuple[int, int]]]:
    """group -> shape label -> (learning rates its re-tuning runs tried, the budget they record), over the
    re-tuning runs among `checks` (one seed's LRs: every seed trains the same ones)."""
    lrs: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    budget: dict[tuple[str, str], int] = {}
    for r in checks:
        if is_adapt(r):
            lrs[r.group][r.shape_label].add(r.lr)
            budget[(r.group, r.shape_label)] = max(budget.get((r.group, r.shape_label), 0),
                                                   int(r.config[VERIFY_KEY]["adapt"]))
    return {g: {label: (len(v), budget[(g, label)]) for label, v in by.items()} for g, by in lrs.items()}


__all__ = ["ADAPT", "ADAPT_LIMIT", "ADAPT_TRIALS", "CHECK_STATES", "TransferCheck", "VERIFY_COUNTS", "VERIFY_KEY",
           "adapt_config", "adapt_trial_counts", "check_transfer", "factors", "is_adapt", "is_verify", "split_runs",
           "targets", "verdict", "verification_losses", "verify_config"]
