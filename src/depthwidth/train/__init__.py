"""The fair, reproducible, resumable trainer: `train(shape, TrainConfig(...)) -> TrainResult`.

Names are imported on first use (`depthwidth.lazy`), so importing one submodule, such as the
configuration, does not import the whole package (torch included)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "EvalOutcome": "depthwidth.train.evaluate",
    "SCHEDULES": "depthwidth.artifact.config",
    "STATUSES": "depthwidth.artifact.result",
    "SavedTensorMeter": "depthwidth.train.measure",
    "TrainConfig": "depthwidth.artifact.config",
    "TrainProgress": "depthwidth.artifact.result",
    "TrainResult": "depthwidth.artifact.result",
    "lr_at": "depthwidth.artifact.schedule",
    "make_optimizer": "depthwidth.train.optim",
    "param_groups": "depthwidth.train.optim",
    "position_buckets": "depthwidth.train.evaluate",
    "resolve_device": "depthwidth.train.setup",
    "train": "depthwidth.train.loop",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
