"""The training runs a study's learning-rate search asks for, given what the store holds.

`plan_runs(expansion, outcomes)` walks every group's search (`depthwidth.study.lr_search`) over the
stored outcomes: a shape's next learning rate is asked for only once each of its trials has finished,
and a trial that finished in an earlier invocation is used at once, so the walk goes as far as the
stored results allow. Called again with the same outcomes it returns the same runs, which is what makes
a killed and resumed study propose the same trials. `[lr] verify` adds its verification runs and, with
"adapt", the re-tuning searches of each group whose check found the optimum moved, walked the same way
(`Planner.adapt_runs`, `depthwidth.study.verify`). The runner calls it before it runs anything and
again after each recorded outcome; `stored_modes(spec, runs)` gives the same groups' modes from the
stored runs alone (for the summary and the fairness check, which have no expansion).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from depthwidth.artifact.config import stored_value
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.expand import Expansion, Group, Run, train_run, with_branches
from depthwidth.study.run_config import config_hash
from depthwidth.study.lr_search import (GroupMode, SearchPlan, across_groups, assess, default_step, group_mode,
                                        next_lr, search_plan)
from depthwidth.study.verify import adapt_config, check_transfer, factors, targets, verify_config

def trial_loss(outcomes: list[tuple[str, float | None] | None]) -> float | None:
    """The mean final loss of one learning rate over its seeds: inf when a seed diverged, None while
    a seed is not finished (or failed, or completed without a loss: the search waits there)."""
    if any(o is not None and o[0] == "diverged" for o in outcomes):
        return float("inf")
    if any(o is None or o[0] != "completed" or o[1] is None for o in outcomes):
        return None
    values = [o[1] for o in outcomes]
    return sum(values) / len(values)


def _seed_losses(runs: list[Run], outcomes: Mapping[str, tuple[str, float | None]]) -> list[float | None] | None:
    """The final losses of `runs` (one per seed), None for a diverged one; None while one is not finished
    (or failed, or completed without a loss)."""
    out = []
    for r in runs:
        o = outcomes.get(r.run_id)
        if o is not None and o[0] == "diverged":
            out.append(None)
        elif o is None or o[0] != "completed" or o[1] is None:
            return None
        else:
            out.append(o[1])
    return out


@dataclass(kw_only=True, slots=True)
class Planner:
    """Builds each run once (its config hash is the costly part) and walks the searches."""

    expansion: Expansion
    _cache: dict = field(default_factory=dict)
    _targets: dict | None = None  # `[lr] verify`: group label -> the shapes it checks (computed once)

    def run(self, group: Group, shape: Shape, lr: float, seed: int) -> Run:
        key = (group.label, shape.label(), lr, seed)
        if key not in self._cache:
            mode = self.expansion.modes[group.label]
            self._cache[key] = train_run(self.expansion.spec, data=self.expansion.data, group=group, shape=shape,
                                         lr=lr, seed=seed, lr_trials=mode.max_trials)
        return self._cache[key]

    def search(self, group: Group, shape: Shape, seeds: tuple[int, ...],
               outcomes: Mapping[str, tuple[str, float | None]]) -> tuple[list[Run], dict[float, float] | None]:
        """The runs of one shape's search so far, and its losses per learning rate once it is done."""
        lr_spec = self.expansion.spec.lr
        mode = self.expansion.modes[group.label]
        lrs = list(lr_spec.values(shape.d_model))
        plan = search_plan(lr_spec, d_model=shape.d_model) if mode.search == "bracket" else None
        while True:
            runs = [self.run(group, shape, lr, seed) for lr in lrs for seed in seeds]
            losses = {}
            for lr in lrs:
                loss = trial_loss([outcomes.get(self.run(group, shape, lr, s).run_id) for s in seeds])
                if loss is None:
                    return runs, None
                losses[lr] = loss
            nxt = next_lr(plan, losses) if plan is not None else None
            if nxt is None:
                return runs, losses
            lrs.append(nxt)

    def verify_run(self, group: Group, shape: Shape, *, of_lr: float, factor: float, seed: int) -> Run:
        """The verification run of `shape` at `of_lr * factor` (`depthwidth.study.verify`)."""
        key = ("verify", group.label, shape.label(), of_lr, factor, seed)
        if key not in self._cache:
            base = self.run(group, shape, float(f"{of_lr * factor:.6g}"), seed)
            config = verify_config(base.config, of_lr=of_lr, factor=factor)
            self._cache[key] = replace(base, run_id=config_hash(config), config=config)
        return self._cache[key]

    def adapt_run(self, group: Group, shape: Shape, *, of_lr: float, lr: float, seed: int) -> Run:
        """The re-tuning run of `shape` at `lr` (`[lr] verify = "adapt"`, `depthwidth.study.verify`)."""
        key = ("adapt", group.label, shape.label(), of_lr, lr, seed)
        if key not in self._cache:
            base = self.run(group, shape, lr, seed)
            config = adapt_config(base.config, of_lr=of_lr, lr=lr, trials=self.expansion.spec.lr.extra_trials)
            self._cache[key] = replace(base, run_id=config_hash(config), config=config)
        return self._cache[key]

    def _verify_step(self, proxy: Shape) -> float:
        lr_spec = self.expansion.spec.lr
        return lr_spec.step or default_step(lr_spec.values(proxy.d_model))

    def _checked(self, group: Group) -> tuple[Shape, ...]:
        if self._targets is None:
            self._targets = targets(self.expansion.groups, self.expansion.modes)
        return self._targets.get(group.label, ())

    def verify_runs(self, group: Group, proxy: Shape, best: float) -> list[Run]:
        """`[lr] verify`: the verification runs of `group` (`depthwidth.study.verify`), none when it is not
        a group to verify."""
        count = self.expansion.spec.lr.verify_count
        if not count:
            return []
        step = self._verify_step(proxy)
        seeds = self.expansion.modes[group.label].final_seeds
        return [self.verify_run(group, shape, of_lr=best, factor=factor, seed=seed)
                for shape in self._checked(group) for factor in factors(count, step) for seed in seeds]

    def moved(self, group: Group, proxy: Shape, best: float,
              outcomes: Mapping[str, tuple[str, float | None]]) -> str | None:
        """`[lr] verify = "adapt"`: once every verification run of `group` has finished, the direction
        ("lower" | "higher") in which a checked shape's optimum moved (of the largest gain when they differ),
        or None (not finished, or the transfer held)."""
        step = self._verify_step(proxy)
        seeds = self.expansion.modes[group.label].final_seeds
        found = []
        for shape in self._checked(group):
            chosen = _seed_losses([self.run(group, shape, best, s) for s in seeds], outcomes)
            trials = {float(f"{best * f:.6g}"): _seed_losses([self.verify_run(group, shape, of_lr=best, factor=f,
                                                                              seed=s) for s in seeds], outcomes)
                      for f in factors(2, step)}
            if chosen is None or any(v is None for v in trials.values()):
                return None  # the check waits for every verification run
            if any(x is None for x in chosen):  # the transferred LR diverged: any LR that did not is better
                finite = {lr: statistics.fmean(v) for lr, v in trials.items() if all(x is not None for x in v)}
                if finite:
                    lr = min(finite, key=finite.get)
                    found.append((math.inf, "lower" if lr < best else "higher"))
                continue
            check = check_transfer(best, chosen, trials)
            if check.moved:
                found.append((check.gain, check.direction))
        return max(found, key=lambda f: f[0])[1] if found else None

    def adapt_runs(self, group: Group, proxy: Shape, best: float,
                   outcomes: Mapping[str, tuple[str, float | None]]) -> list[Run]:
        """`[lr] verify = "adapt"`: the re-tuning runs of `group` so far, none while its check waits or when
        the transfer held. Every shape but the proxy searches (`next_lr`) from the LRs it has trained (the
        transferred one, a checked shape's verification LRs) within `extra_trials` more, all at the
        transferred runs' seeds; a shape with only the transferred LR first steps where the check went."""
        lr_spec = self.expansion.spec.lr
        if not lr_spec.adapts or not self._checked(group):
            return []
        direction = self.moved(group, proxy, best, outcomes)
        if direction is None:
            return []
        mode = self.expansion.modes[group.label]
        step = self._verify_step(proxy)
        out: dict[str, Run] = {}
        for shape in group.shapes:
            if mode.proxy_group is None and shape.label() == mode.proxy:
                continue  # the proxy's LR was searched on the proxy itself
            for r in self.retune(group, shape, best=best, step=step, direction=direction, outcomes=outcomes):
                out.setdefault(r.run_id, r)
        return list(out.values())

    def retune(self, group: Group, shape: Shape, *, best: float, step: float, direction: str,
               outcomes: Mapping[str, tuple[str, float | None]]) -> list[Run]:
        """One shape's re-tuning runs so far: its search from the LRs it has trained, within `extra_trials` more."""
        seeds = self.expansion.modes[group.label].final_seeds
        checked = {float(f"{best * f:.6g}"): f for f in factors(2, step)} if shape in self._checked(group) else {}
        first = () if checked else (float(f"{best * step ** (-1 if direction == 'lower' else 1):.6g}"),)
        initial = tuple(sorted({best, *checked, *first}))
        plan = SearchPlan(initial=initial, max_trials=1 + len(checked) + self.expansion.spec.lr.extra_trials,
                          step=step)
        tried, out = list(initial), {}
        while True:
            losses = {}
            for lr in tried:
                if lr == best:
                    runs = [self.run(group, shape, best, s) for s in seeds]
                elif lr in checked:
                    runs = [self.verify_run(group, shape, of_lr=best, factor=checked[lr], seed=s) for s in seeds]
                else:
                    runs = [self.adapt_run(group, shape, of_lr=best, lr=lr, seed=s) for s in seeds]
                    out.update((r.run_id, r) for r in runs)
                loss = trial_loss([outcomes.get(r.run_id) for r in runs])
                if loss is None:
                    return list(out.values())  # a step is taken once every trial has finished
                losses[lr] = loss
            nxt = next_lr(plan, losses)
            if nxt is None:
                return list(out.values())
            tried.append(nxt)

    def runs(self, outcomes: Mapping[str, tuple[str, float | None]]) -> tuple[Run, ...]:
        """Every run of the plan: the expansion's, then those the searches have proposed (spec order)."""
        out: dict[str, Run] = {r.run_id: r for r in self.expansion.train_runs}
        for group in self.expansion.groups:
            mode = self.expansion.modes[group.label]
            if mode.kind == "grid" or group.horizon is not None:
                continue  # a grid is expanded already; a horizon group's runs are its parents' branches
            if mode.kind == "bracket":
                for shape in group.shapes:
                    for r in self.search(group, shape, mode.seeds, outcomes)[0]:
                        out.setdefault(r.run_id, r)
                continue
            home = next(g for g in self.expansion.groups if g.label == (mode.proxy_group or group.label))
            proxy = next(s for s in home.shapes if s.label() == mode.proxy)
            runs, losses = self.search(home, proxy, mode.seeds, outcomes)  # cached: searched once for all groups
            for r in runs:
                out.setdefault(r.run_id, r)
            best = assess(losses).best_lr if losses else None
            if best is None or losses[best] == float("inf"):
                continue  # still searching, or every learning rate of the proxy diverged
            for shape in group.shapes:
                for seed in mode.final_seeds:
                    r = self.run(group, shape, best, seed)
                    out.setdefault(r.run_id, r)
            for r in self.verify_runs(group, proxy, best) + self.adapt_runs(group, proxy, best, outcomes):
                out.setdefault(r.run_id, r)
        e = self.expansion
        branched = with_branches([r for r in out.values() if r.parent is None], spec=e.spec, data=e.data,
                                 groups=e.groups)
        return tuple(branched) + e.bench_runs


def plan_runs(expansion: Expansion, outcomes: Mapping[str, tuple[str, float | None]]) -> tuple[Run, ...]:
    """Every run the study asks for given `outcomes` (run id -> (status, final validation loss))."""
    return Planner(expansion=expansion).runs(outcomes)


def stored_modes(spec, runs) -> dict[str, GroupMode]:
    """group label -> its `GroupMode`, from the spec and the stored training runs (`RunRecord`s)."""
    params: dict[str, dict[str, int]] = {}
    parametrization: dict[str, str] = {}
    for r in runs:
        if r.kind != "train":
            continue
        shapes = params.setdefault(r.group, {})
        if r.shape_label not in shapes:
            shapes[r.shape_label] = count_params(Shape.from_dict(r.config["shape"])).total
        parametrization.setdefault(r.group, stored_value(r.config.get("train") or {}, "parametrization"))
    modes = {g: group_mode(spec.lr, seeds=spec.seeds, parametrization=parametrization[g], shapes=shapes)
             for g, shapes in params.items()}
    return across_groups(modes, params, spec.lr.transfer_from)


__all__ = ["Planner", "plan_runs", "stored_modes", "trial_loss"]
