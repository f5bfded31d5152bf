"""The trained run: its folder's files (`folder`), atomic checkpoints (`checkpoint`), the recorded settings
(`config.TrainConfig`), the typed records of its bookkeeping (`records`), the live state a checkpoint saves
(`state.TrainState`), its result (`result.TrainResult`), the model built from shape and config (`model`),
and the one loader every reader uses (`load.load_trained`).

Names are imported on first use (`depthwidth.lazy`), so reading a config does not import torch."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "CheckpointMeta": "depthwidth.artifact.records",
    "CurvePoint": "depthwidth.artifact.records",
    "EvalPoint": "depthwidth.artifact.records",
    "TrainConfig": "depthwidth.artifact.config",
    "TrainResult": "depthwidth.artifact.result",
    "TrainState": "depthwidth.artifact.state",
    "TrainedRun": "depthwidth.artifact.load",
    "build_model": "depthwidth.artifact.model",
    "load_trained": "depthwidth.artifact.load",
    "run_multipliers": "depthwidth.artifact.model",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
