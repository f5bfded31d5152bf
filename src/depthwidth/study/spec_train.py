"""The [train] section of a study spec and the one conversion from a spec to a run's `TrainConfig`.

[train] accepts any `TrainConfig` field that the spec does not set elsewhere (`PLACED`: the data
fields live in [data], evaluation in [eval], the learning rate in [lr], the seed in `seeds`, threads and
how a run spreads over processes (nproc, parallel, tp) in [execution]), so a field added to `TrainConfig` is accepted with no edit here; values are checked by
`TrainConfig` itself. Two study conveniences are converted here and nowhere else: `tokens_per_param`
(tokens = r * the budget's parameter target, applied by the expansion) and `min_lr_ratio`
(min_lr = ratio * lr; default 0.1, which is TrainConfig's lr / 10).

A study factor: a `FACTORS` key given as an array (`parametrization = ["sp", "completep"]`) trains every
budget once per value, side by side; each value makes its own budget group (`<label>-<value>`).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from depthwidth.study.schema import SpecError, check_value, number

#: TrainConfig fields that a spec sets outside [train], and where.
PLACED = {"corpus": "data.corpus", "tokenizer": "data.tokenizer", "val_fraction": "data.val_fraction",
          "seq_len": "data.seq_len", "batch_size": "data.batch_size", "eval_every": "eval.every",
          "eval_windows": "eval.windows", "lr": "lr", "seed": "seeds", "threads": "execution.threads",
          "nproc": "execution.nproc_per_run", "parallel": "execution.parallel", "tp": "execution.tp"}
#: TrainConfig fields a study cannot use yet, and why (the run would train what the study never reads).
NOT_IN_STUDIES: dict[str, str] = {}
#: TrainConfig fields a [train] section may give as an array of values: one budget group per value.
FACTORS = ("parametrization",)
#: Defaults a study uses where they differ from TrainConfig's: resume points for long studies.
STUDY_DEFAULTS = {"checkpoint_every": 200}
#: min_lr = min_lr_ratio * lr unless [train] gives min_lr itself (TrainConfig's default is lr / 10).
DEFAULT_MIN_LR_RATIO = 0.1


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSpec:
    """[train]: any `TrainConfig` field that the spec does not set elsewhere (see `PLACED`), plus two
    study conveniences: `tokens_per_param` (tokens = r * the budget's parameter target) and
    `min_lr_ratio`. A field added to `TrainConfig` is accepted here with no edit. Values are checked by
    `TrainConfig` itself when the spec is parsed (`StudySpec.train_config`)."""

    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # TrainConfig field -> value
    tokens_per_param: float | None = None
    min_lr_ratio: float | None = None
    factors: Mapping[str, tuple] = dataclasses.field(default_factory=dict)  # FACTORS key -> its values

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "factors", MappingProxyType({k: tuple(v) for k, v in self.factors.items()}))
        given = [k for k in ("tokens", "tokens_per_param", "steps") if self.get(k) is not None]
        if len(given) > 1:  # none is fine when every budget is a compute budget (it fixes the tokens)
            raise SpecError(f"give one training budget: tokens, tokens_per_param or steps (got {', '.join(given)})",
                            key="train")
        if self.min_lr_ratio is not None and "min_lr" in self.settings:
            raise SpecError("give min_lr or min_lr_ratio, not both", key="train.min_lr_ratio")

    def get(self, name: str) -> Any:
        if name in ("tokens_per_param", "min_lr_ratio"):
            return getattr(self, name)
        return self.settings.get(name, STUDY_DEFAULTS.get(name))

    @property
    def tokens(self) -> int | None:
        return self.settings.get("tokens")

    @property
    def steps(self) -> int | None:
        return self.settings.get("steps")

    @property
    def checkpoint_every(self) -> int:
        return self.get("checkpoint_every") or 0

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.settings)
        for name in ("tokens_per_param", "min_lr_ratio"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out | {k: list(v) for k, v in self.factors.items()}

    def levels(self) -> tuple[dict[str, Any], ...]:
        """The factor values a budget is trained under, one dict per group ({} without a factor)."""
        import itertools

        keys = list(self.factors)
        return tuple(dict(zip(keys, values)) for values in itertools.product(*(self.factors[k] for k in keys)))


def train_section(raw: Any, *, data, eval) -> TrainSpec:
    """[train] from its TOML table: keys are checked against `TrainConfig`'s fields, values by
    `TrainConfig` itself together with [data] and [eval] (again per run when the spec is expanded,
    where each budget group's tokens are known)."""
    from depthwidth.artifact.config import TrainConfig

    if not isinstance(raw, dict):
        raise SpecError(f"expected a table, got {raw!r}", key="train")
    known = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in PLACED]
    hints = typing.get_type_hints(TrainConfig)
    settings, extra, factors = {}, {}, {}
    for key, value in raw.items():
        if key in ("tokens_per_param", "min_lr_ratio"):
            maximum = 1.0 if key == "min_lr_ratio" else None
            extra[key] = check_value(number(0.0, inclusive=key == "min_lr_ratio", maximum=maximum), value,
                                     key=f"train.{key}")
        elif key in FACTORS and isinstance(value, list):
            if not value or len(set(map(repr, value))) != len(value):
                raise SpecError("a factor is an array of distinct values", key=f"train.{key}")
            factors[key] = tuple(value)  # each value is checked by TrainConfig below
        elif key in PLACED:
            raise SpecError(_placed(key), key=f"train.{key}")
        elif key in NOT_IN_STUDIES:
            raise SpecError(NOT_IN_STUDIES[key], key=f"train.{key}")
        elif key in known:  # TOML writes 1 for 1.0: a float field stores a float (the run id hashes it)
            floats = hints[key] is float or float in typing.get_args(hints[key])
            settings[key] = float(value) if floats and type(value) is int else value
        else:
            raise SpecError(f"unknown key {key!r}; expected one of {', '.join(known)} (TrainConfig's fields), "
                            "tokens_per_param, min_lr_ratio", key=f"train.{key}")
    spec = TrainSpec(settings=settings, factors=factors, **extra)
    budget = {k: settings[k] for k in ("steps", "tokens") if k in settings}
    if not budget:  # tokens from each budget: any count past the warmup will do here
        warmup = settings.get("warmup", 0)
        budget = {"steps": warmup + 1 if type(warmup) is int and warmup >= 0 else 1}
    for level in spec.levels():
        train_config(data, eval, spec, lr=1.0, seed=0, budget=budget, overrides=level)
    return spec


def _placed(key: str) -> str:
    """Where a `PLACED` key goes instead of [train], in one line."""
    section, _, name = PLACED[key].rpartition(".")
    where = f": put it under [{section}]" + (f" as {name}" if name != key else "") if section else ""
    return f"{key} is set by {PLACED[key]} in a study spec, not in [train]{where}"


def train_config(data, eval, train: TrainSpec, *, lr: float, seed: int, budget: dict, threads: int | None = None,
                 overrides: Mapping[str, Any] | None = None):
    """The `TrainConfig` of one run from a spec's [data] (`data`), [eval] (`eval`) and [train] sections,
    the study defaults, and what varies per run; `budget` is {"tokens": N} or {"steps": N}. A rejected
    value is a SpecError naming its key in the spec (see `PLACED`); `overrides` are a group's factor values."""
    from depthwidth.artifact.config import TrainConfig

    settings = {**STUDY_DEFAULTS, **train.settings, **(overrides or {})}
    for name in ("steps", "tokens"):
        settings.pop(name, None)
    if "min_lr" not in settings:
        settings["min_lr"] = lr * (train.min_lr_ratio if train.min_lr_ratio is not None else DEFAULT_MIN_LR_RATIO)
    try:
        return TrainConfig(corpus=data.corpus, tokenizer=data.tokenizer, val_fraction=data.val_fraction,
                           seq_len=data.seq_len, batch_size=data.batch_size, eval_every=eval.every,
                           eval_windows=eval.windows, **settings, **budget, lr=lr, seed=seed, threads=threads)
    except ValueError as exc:
        name = re.match(r"(\w+)=", str(exc))
        key = name and (PLACED.get(name.group(1)) or f"train.{name.group(1)}")
        raise SpecError(str(exc), key=key or "train") from None


__all__ = ["DEFAULT_MIN_LR_RATIO", "FACTORS", "PLACED", "STUDY_DEFAULTS", "TrainSpec", "train_config", "train_section"]
