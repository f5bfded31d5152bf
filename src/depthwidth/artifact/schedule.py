"""A run's schedule read from its `TrainConfig`: the learning rate of each step (`lr_at`), where a WSD run's
cooldown starts, and the config of the shorter run a horizon stands for (`branch_config`)."""

from __future__ import annotations

import math

from depthwidth.artifact.config import TrainConfig, decay_steps, horizon_steps


def branch_config(config: TrainConfig, fraction: float) -> TrainConfig:
    """The config of the run that horizon `fraction` of `config` stands for: its steps, no horizons (the
    shorter WSD run whose cooldown branches from `config`'s stable phase). A run given in tokens gives its
    branch in tokens (the branch's steps times the tokens per step), so it is the config of that run as it
    would be asked for on its own."""
    steps = horizon_steps(config.total_steps, fraction)
    if config.steps is None:
        return config.with_(tokens=steps * config.tokens_per_step, horizons=None)
    return config.with_(steps=steps, tokens=None, horizons=None)


def cooldown_start(config: TrainConfig) -> int:
    """The first step of a WSD run's cooldown (every step before it, after the warmup, is at `lr`)."""
    return config.total_steps - decay_steps(config.total_steps, config.decay_fraction)


def lr_at(config: TrainConfig, step: int) -> float:
    """Learning rate of `step` (0-based): linear warmup over `warmup` steps to `lr`
    ((step + 1) / warmup), then cosine (Loshchilov & Hutter 2017), linear or constant decay
    reaching `final_lr` at the last step; or WSD (warmup-stable-decay: Hu et al. 2024, MiniCPM, arXiv
    2404.06395; Hägele et al. 2024, arXiv 2405.18392): `lr` until the last `decay_fraction` of the steps,
    then a cooldown to `final_lr` whose progress p = (step - start + 1) / decay steps reaches 1 at the last
    step, shaped as "linear" (1 - p), "cosine" ((1 + cos(pi p)) / 2) or "1-sqrt" (1 - sqrt(p), Hägele et al.'s
    eq. for the cooldown that beat linear). The stable phase of a WSD run does not depend on its length, so
    a shorter run's cooldown can branch from a longer run's checkpoint (`horizons`)."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    if config.schedule == "constant":
        return config.lr
    if config.schedule == "wsd":
        start = cooldown_start(config)
        if step < start:
            return config.lr
        p = min(1.0, (step - start + 1) / (config.total_steps - start))
        fall = {"linear": p, "cosine": 0.5 * (1.0 - math.cos(math.pi * p)), "1-sqrt": math.sqrt(p)}
        return config.lr - (config.lr - config.final_lr) * fall[config.decay_shape]
    span = config.total_steps - 1 - config.warmup
    progress = min(1.0, (step - config.warmup) / span) if span > 0 else 1.0
    low = config.final_lr
    if config.schedule == "linear":
        return config.lr - (config.lr - low) * progress
    return low + 0.5 * (1.0 + math.cos(math.pi * progress)) * (config.lr - low)

