"""The training runs a study's learning-rate search asks for, given what the store holds.

`plan_runs(expansion, outcomes)` walks every group's search (`depthwidth.study.lr_search`) over the
stored outcomes: a shape's next learning rate is asked for only once each of its trials has finished,
and a trial that finished in an earlier invocation is used at once, so the walk goes as far as the
stored results allow. Called again with the same outcomes it returns the same runs, which is what makes
a killed and resumed study propose the same trials. The runner calls it before it runs anything and
again after each recorded outcome; `stored_modes(spec, runs)` gives the same groups' modes from the
stored runs alone (for the summary and the fairness check, which have no expansion).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from depthwidth.artifact.config import stored_value
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.expand import Expansion, Group, Run, train_run, with_branches
from depthwidth.study.run_config import config_hash
from depthwidth.study.lr_search import (GroupMode, across_groups, assess, default_step, group_mode, next_lr,
                                        search_plan)
from depthwidth.study.verify import factors, targets, verify_config

def trial_loss(outcomes: list[tuple[str, float | None] | None]) -> float | None:
    """The mean final loss of one learning rate over its seeds: inf when a seed diverged, None while
    a seed is not finished (or failed, or completed without a loss: the search waits there)."""
    if any(o is not None and o[0] == "diverged" for o in outcomes):
        return float("inf")
    if any(o is None or o[0] != "completed" or o[1] is None for o in outcomes):
        return None
    values = [o[1] for o in outcomes]
    return sum(values) / len(values)


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

    def verify_runs(self, group: Group, proxy: Shape, best: float) -> list[Run]:
        """`[lr] verify`: the verification runs of `group` (`depthwidth.study.verify`), none when it is not
        a group to verify."""
        lr_spec = self.expansion.spec.lr
        if not lr_spec.verify:
            return []
        if self._targets is None:
            self._targets = targets(self.expansion.groups, self.expansion.modes)
        shapes = self._targets.get(group.label, ())
        step = lr_spec.step or default_step(lr_spec.values(proxy.d_model))
        mode = self.expansion.modes[group.label]
        out = []
        for shape in shapes:
            for factor in factors(lr_spec.verify, step):
                lr = float(f"{best * factor:.6g}")
                for seed in mode.final_seeds:
                    base = self.run(group, shape, lr, seed)
                    config = verify_config(base.config, of_lr=best, factor=factor)
                    out.append(replace(base, run_id=config_hash(config), config=config))
        return out

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
            for r in self.verify_runs(group, proxy, best):
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
