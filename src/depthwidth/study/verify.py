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
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping

from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape

#: the run config's key that marks a verification run
VERIFY_KEY = "verify"
#: how many extra learning rates `[lr] verify` may ask for per checked shape
VERIFY_COUNTS = (0, 2, 4)


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


def verdict(chosen_lr: float, chosen: list[float], trials: Mapping[float, list[float | None]]) -> str:
    """In words: whether a verification LR beat the transferred one by more than two standard errors
    of the difference of the seed means (seed spread pooled; one seed: by any margin, said as unresolved)."""
    done = {lr: v for lr, v in trials.items() if v and all(x is not None for x in v)}
    if not chosen or not done:
        return "verification runs not finished"
    base = statistics.mean(chosen)
    best_lr = min(done, key=lambda lr: statistics.mean(done[lr]))
    gain = base - statistics.mean(done[best_lr])
    spreads = [statistics.variance(v) for v in (chosen, done[best_lr]) if len(v) > 1]
    where = "lower" if best_lr < chosen_lr else "higher"
    if gain <= 0:
        return f"the transferred LR {chosen_lr:.3g} is the best of those tried"
    if not spreads:
        return (f"LR {best_lr:.3g} ({where}) is {gain:.3f} nats better than the transferred {chosen_lr:.3g}; "
                "one seed, so not resolved against noise")
    se = math.sqrt(statistics.mean(spreads) * (1 / len(chosen) + 1 / len(done[best_lr])))
    if gain > 2 * se:
        return (f"the optimum moved: LR {best_lr:.3g} ({where}) is {gain:.3f} nats better than the transferred "
                f"{chosen_lr:.3g} (> 2 standard errors, {se:.3f})")
    return (f"LR {best_lr:.3g} ({where}) is {gain:.3f} nats better than the transferred {chosen_lr:.3g}, within "
            f"2 standard errors ({se:.3f}): the transfer holds within noise")


__all__ = ["VERIFY_COUNTS", "VERIFY_KEY", "factors", "is_verify", "split_runs", "targets", "verdict",
           "verification_losses", "verify_config"]
