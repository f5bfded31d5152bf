"""The stored form of a study's run: its canonical config, whose sha256 is the run id.

A training run (format `TRAIN_FORMAT` = 2):

    {"kind": "train", "format": 2, "shape": Shape.to_dict(), "corpus_hash": "<sha256 of the corpus>",
     "train": TrainConfig.to_dict() without its execution fields (nor init_from while unset)
     [, "init_hash": "<sha256 of the init_from model folder>"]}

`train` is `TrainConfig`'s own dict: every field that can change a run's numbers (lr, seed and tokens
included), none of `EXECUTION_FIELDS` (threads, cache folder, checkpoint interval, MFU denominator),
which the executor sets. `train_config_of` rebuilds the `TrainConfig` with one `from_dict`, so a field
added to `TrainConfig` is stored, hashed and rebuilt with no edit here. The corpus content hash is part
of the identity: editing a corpus file makes new runs instead of silently reusing old ones.

A benchmark run (format `BENCH_FORMAT` = 1): {"kind": "bench", "format": 1, "shape", "bench", "hardware"}.

Older formats of a training run are converted on read by `upgrade_run_config`, one numbered step of
`TRAIN_FORMAT_STEPS` at a time (listed with every other migration of stored data in
`depthwidth.study.migrations`). Format 1 (studies written before: `data`, `train` with `min_lr_ratio`,
`lr` and `seed` apart) becomes exactly the config the current expansion makes for the same spec, so an
old study's finished runs keep their results under their new ids. A field added later whose new default is
not what earlier runs did (`artifact.config.ADDED_FIELDS`: `adamw`, foreach before) is left out of a config
while at that earlier value, so an earlier run keeps its id and is read back as what it did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from depthwidth.artifact.config import EXECUTION_FIELDS, TrainConfig, identity_dict, with_added_fields

BENCH_FORMAT = 1
#: TrainConfig fields that describe the data and batch geometry (the fairness check's "data").
DATA_FIELDS = ("corpus", "tokenizer", "val_fraction", "test_fraction", "seq_len", "batch_size")
#: TrainConfig fields a study sets per run (learning-rate trial, seed, group budget): not "settings".
PER_RUN_FIELDS = ("lr", "min_lr", "seed", "tokens", "steps")
#: TrainConfig fields that add cooldown branches to a run without changing its numbers (`study.horizons`):
#: a branch's own config has none, so they are not a setting the fairness check compares.
BRANCH_FIELDS = ("horizons",)


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, ASCII, no NaN: the same bytes for the same config everywhere."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def config_hash(config: dict) -> str:
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def train_run_config(*, shape: dict, corpus_hash: str, config: TrainConfig, init_hash: str | None = None) -> dict:
    """The canonical config of one training run; a run that starts from a model folder (`init_from`)
    also carries that folder's content hash, `init_hash`."""
    out = {"kind": "train", "format": TRAIN_FORMAT, "shape": shape, "corpus_hash": corpus_hash,
           "train": _identity_train(config)}
    if config.init_from is not None:
        if init_hash is None:
            raise ValueError("a run with init_from needs the content hash of that folder (init_hash)")
        out["init_hash"] = init_hash
    return out


def train_config_of(run_config: dict, **execution: Any) -> TrainConfig:
    """The trainer's `TrainConfig` of a stored training run, with the executor's `execution` fields
    (threads, checkpoint_every, cache_dir, peak_flops) added."""
    run_config = upgrade_run_config(run_config)
    unknown = sorted(set(execution) - set(EXECUTION_FIELDS))
    if unknown:
        raise TypeError(f"not execution fields: {', '.join(unknown)}; expected some of {', '.join(EXECUTION_FIELDS)}")
    return TrainConfig.from_dict({**with_added_fields(run_config["train"]), **execution})


def run_data(run_config: dict) -> dict:
    """What a run trains on: corpus content hash, tokenizer, split and batch geometry."""
    run_config = upgrade_run_config(run_config)
    train = run_config["train"]
    return {"corpus_hash": run_config["corpus_hash"], **{k: train.get(k) for k in DATA_FIELDS}}


def run_settings(run_config: dict) -> dict:
    """A run's training settings apart from its data and what a study varies per run; the final
    learning rate appears as its ratio to the peak (which is what a spec sets)."""
    train = upgrade_run_config(run_config)["train"]
    out = {k: v for k, v in train.items() if k not in DATA_FIELDS and k not in PER_RUN_FIELDS
           and k not in BRANCH_FIELDS}
    if train.get("min_lr") is not None and train.get("lr"):
        out["min_lr_ratio"] = float(f"{train['min_lr'] / train['lr']:.12g}")
    return out


def run_tokens(run_config: dict) -> int | None:
    """Training tokens of a run as configured."""
    return upgrade_run_config(run_config)["train"].get("tokens")


def upgrade_run_config(config: dict) -> dict:
    """A training run's config in the current format: each step of `TRAIN_FORMAT_STEPS` above its
    format applied in order (a config of the current format, of an unknown one, or not a training run's
    is returned unchanged)."""
    if config.get("kind") != "train":
        return config
    for step in TRAIN_FORMAT_STEPS:
        if config.get("format") == step.format - 1:
            config = step.apply(config)
    return config


@dataclass(frozen=True, kw_only=True, slots=True)
class FormatStep:
    """One numbered step of the training-run format: `apply` takes a config of format `format - 1` and
    gives the same run in format `format`."""

    format: int
    name: str
    apply: Callable[[dict], dict]


def _train_format_2(config: dict) -> dict:
    """Format 1 -> 2. Format 1 trained with `min_lr = lr * min_lr_ratio` and every other field at its
    default; the conversion computes the same value the same way, so the trainer's own config hash (and
    with it a checkpoint of an unfinished run) is unchanged."""
    d, t = config["data"], config["train"]
    train = TrainConfig(
        corpus=d["corpus"], tokenizer=d["tokenizer"], val_fraction=d["val_fraction"], seq_len=d["seq_len"],
        batch_size=d["batch_size"], tokens=t["tokens"], lr=config["lr"], min_lr=config["lr"] * t["min_lr_ratio"],
        warmup=t["warmup"], schedule=t["schedule"], beta1=t["beta1"], beta2=t["beta2"],
        weight_decay=t["weight_decay"], grad_clip=t["grad_clip"], dtype=t["dtype"], dropout=t["dropout"],
        eval_every=t["eval_every"], eval_windows=t["eval_windows"], seed=config["seed"],
    )
    return {"kind": "train", "format": 2, "shape": config["shape"], "corpus_hash": d["corpus_hash"],
            "train": _identity_train(train)}


def _identity_train(config: TrainConfig) -> dict:
    """The `train` part of a run config: the run's identity fields, none of the executor's."""
    return {k: v for k, v in identity_dict(config).items() if k not in EXECUTION_FIELDS}


#: Every step of the training-run format, in order; step n converts format n - 1 to n.
TRAIN_FORMAT_STEPS: tuple[FormatStep, ...] = (
    FormatStep(format=2, name="TrainConfig's own dict", apply=_train_format_2),
)
#: The format a training run is stored in now: the highest step's.
TRAIN_FORMAT = TRAIN_FORMAT_STEPS[-1].format


__all__ = ["BENCH_FORMAT", "BRANCH_FIELDS", "DATA_FIELDS", "PER_RUN_FIELDS", "TRAIN_FORMAT", "TRAIN_FORMAT_STEPS", "FormatStep",
           "canonical_json", "config_hash", "run_data", "run_settings", "run_tokens", "train_config_of",
           "train_run_config", "upgrade_run_config"]
