"""A run that starts from a local Hugging Face checkpoint (`TrainConfig.init_from`) instead of a random init.

The folder is read once, before anything is written (`depthwidth.hfio.load.read_hf_checkpoint`, exact
import: safetensors only, a class our model computes exactly). Its shape must be the run's shape, and
when it is an export of ours, its tokenizer must be the run's. Its content hash travels in the
checkpoint's meta ("init_sha256"), so a resume refuses a folder whose content changed under the same
path; at step 0 the model holds exactly the folder's weights (the optimizer state starts fresh).
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.errors import UserError, echo
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import TrainConfig
from depthwidth.train.run_dir import _differences


def read_init(config: TrainConfig, shape: Shape, *, tokenizer_fingerprint: str):
    """The `HFCheckpoint` to start from, or None without `init_from`; UserError when it does not fit."""
    if config.init_from is None:
        return None
    from depthwidth.hfio.load import read_hf_checkpoint

    init = read_hf_checkpoint(config.init_from, exact=True)
    if init.shape != shape:
        diffs = _differences(init.shape.to_dict(), shape.to_dict())
        raise UserError(f"init_from {config.init_from} holds shape {init.shape.label()}, not this run's "
                        f"{shape.label()} ({'; '.join(diffs[:4])}); drop the shape flags to train its own shape")
    if init.tokenizer_fingerprint not in (None, tokenizer_fingerprint):
        raise UserError(f"init_from {config.init_from} was trained with tokenizer "
                        f"{echo(init.tokenizer_fingerprint)}, but this run tokenizes with {tokenizer_fingerprint}; "
                        "use the same tokenizer and corpus")
    _check_folded(config)
    return init


def _check_folded(config: TrainConfig) -> None:
    """An export of a muP/CompleteP run holds its multipliers folded into the weights (`hf.fold`): it is an SP
    model computing the trained function, and a non-SP run from it would apply the multipliers twice."""
    from depthwidth.files import read_json_object
    from depthwidth.hfio.weights import CONFIG

    record = read_json_object(Path(config.init_from) / CONFIG, what="config").get("depthwidth")
    parametrization = record.get("parametrization") if isinstance(record, dict) else None
    folded = parametrization.get("folded") if isinstance(parametrization, dict) else None
    if folded and config.parametrization != "sp":
        raise UserError(f"init_from {config.init_from} is an export with its {echo(parametrization.get('name'))} "
                        f"multipliers folded into the weights ({', '.join(map(echo, folded))}); "
                        f"parametrization={config.parametrization!r} would apply them again: continue it with "
                        "parametrization='sp'")


def check_resumed_init(run_dir: Path, payload: dict | None, init) -> None:
    """Refuse to resume a checkpoint that started from other weights than `init` now holds."""
    if payload is None:
        return
    stored, now = payload["meta"].get("init_sha256"), init.sha256 if init is not None else None
    if stored != now:
        raise UserError(f"{run_dir} holds a checkpoint that started from weights with hash {str(stored)[:12]}, but "
                        f"init_from now has {str(now)[:12]}; restore that folder or train into another one")


__all__ = ["check_resumed_init", "read_init"]
