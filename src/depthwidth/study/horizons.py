"""Several token budgets from one run per shape: a study's horizon groups (`[train] horizons`).

With `[train] schedule = "wsd"` and `horizons = [0.25, 0.5, 1.0]`, every training run of a budget group also
trains the cooldown branch of each earlier horizon (`depthwidth.train.horizons`). A branch is, bit for bit,
the standalone WSD run of that length - same seed, same batches, the same learning rate up to its own
cooldown - so the study stores it as that run: its config is `artifact.schedule.branch_config` of the parent's,
its run id that config's hash (a study that trained the shorter run on its own would find it finished).

Each horizon h < 1 of a group G makes a group `G@h` with the same shapes, learning rates and seeds at
`h` of G's steps; it is an ordinary budget group for results, tables, fits and the fairness check. Its
runs are never submitted: the parent run trains them, and its outcome carries theirs. The learning rate
of a shape at every horizon is the one chosen at the full horizon (`selection.select_lrs`).

A horizon group's label is its parent's, `@`, and the fraction (`split_horizon`); a budget label cannot hold
`@`, so the form cannot be taken by a user's label.
"""

from __future__ import annotations

from dataclasses import replace

from depthwidth.artifact.config import TrainConfig, decay_steps, horizon_steps
from depthwidth.artifact.schedule import branch_config

SEPARATOR = "@"


def horizon_label(group: str, fraction: float) -> str:
    return f"{group}{SEPARATOR}{fraction:g}"


def split_horizon(label: str) -> tuple[str, float] | None:
    """(parent group, fraction) of a horizon group's label; None for any other group."""
    parent, sep, tail = label.rpartition(SEPARATOR)
    if not sep or not parent:
        return None
    try:
        fraction = float(tail)
    except ValueError:
        return None
    return (parent, fraction) if 0.0 < fraction < 1.0 else None


def horizon_groups(groups, config: TrainConfig) -> list:
    """Each group followed by one group per earlier horizon of `config` (a group's runs all have the same
    steps, so a horizon's steps are the same for every member). `config` is one run's TrainConfig of the
    spec (its horizons and batch geometry); without horizons the groups are returned unchanged."""
    fractions = (config.horizons or ())[:-1]
    if not fractions:
        return list(groups)
    out = []
    per_step = config.tokens_per_step
    for group in groups:
        out.append(group)
        steps = max(1, -(-group.tokens // per_step))  # as TrainConfig.total_steps counts them
        for h in fractions:
            shares = {label: replace(share, seconds=share.seconds * h, steps=horizon_steps(share.steps, h),
                                     tokens=horizon_steps(share.steps, h) * per_step)
                      for label, share in group.shares.items()}  # an equal-time group: that fraction of its time
            out.append(replace(group, label=horizon_label(group.label, h), tokens=horizon_steps(steps, h) * per_step,
                               shares=shares,
                               notes=(f"the cooldown branch at {h:g} of {group.label}'s steps of every run "
                                      f"({group.label}'s learning rates)",)))
    return out


def branch_runs(run, *, groups: dict, config_of, run_config_of) -> list:
    """The runs that `run` (a parent with horizons) trains as cooldown branches, one per earlier horizon:
    config = its TrainConfig's `branch_config`, in the horizon group of its own group. `config_of` gives a
    run's TrainConfig, `run_config_of(run, branch, fraction)` a branch's id and canonical config."""
    config = config_of(run)
    out = []
    for h in (config.horizons or ())[:-1]:
        label = horizon_label(run.group, h)
        if label not in groups:
            continue
        run_id, stored = run_config_of(run, branch_config(config, h), h)
        out.append(replace(run, run_id=run_id, group=label, config=stored, parent=run.run_id, horizon=h))
    return out


def extra_cost(config: TrainConfig) -> float:
    """The branches' training steps as a fraction of one run's: each trains only its cooldown."""
    fractions = (config.horizons or ())[:-1]
    total = config.total_steps
    steps = sum(decay_steps(horizon_steps(total, h), config.decay_fraction) for h in fractions)
    return steps / total if total else 0.0


__all__ = ["SEPARATOR", "branch_runs", "extra_cost", "horizon_groups", "horizon_label", "split_horizon"]
