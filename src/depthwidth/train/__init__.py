"""The fair, reproducible, resumable trainer: `train(shape, TrainConfig(...)) -> TrainResult`.

Names are imported on first use (PEP 562), so importing one submodule, such as the
configuration, does not import the whole package (torch included)."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "EvalOutcome": "depthwidth.train.evaluate",
    "SCHEDULES": "depthwidth.train.config",
    "STATUSES": "depthwidth.train.result",
    "SavedTensorMeter": "depthwidth.train.measure",
    "TrainConfig": "depthwidth.train.config",
    "TrainProgress": "depthwidth.train.result",
    "TrainResult": "depthwidth.train.result",
    "lr_at": "depthwidth.train.config",
    "make_optimizer": "depthwidth.train.loop",
    "param_groups": "depthwidth.train.loop",
    "position_buckets": "depthwidth.train.evaluate",
    "resolve_device": "depthwidth.train.loop",
    "train": "depthwidth.train.loop",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)
