"""What a run folder already holds, and whether this run may use it (see `checkpoint` for the files).

Nothing stored is ever overwritten by a different run: a folder holding a run (run.json,
checkpoint.pt or result.json) is only reused with resume=True and the same shape, config (fields
that do not change the numbers aside) and dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from depthwidth.errors import UserError
from depthwidth import __version__
from depthwidth.data.dataset import Dataset
from depthwidth.shapes.shape import Shape
from depthwidth.artifact import checkpoint as ckpt
from depthwidth.artifact.folder import CHECKPOINT, CHECKPOINT_PREV, ERROR, RESULT, RUN, read_json
from depthwidth.files import write_json
from depthwidth.artifact.config import NON_NUMERIC_FIELDS, TrainConfig, with_added_fields
from depthwidth.train.dist_checkpoint import RESHARDABLE
from depthwidth.artifact.result import TrainResult


def _differences(stored: dict[str, Any], given: dict[str, Any], *, ignore=()) -> list[str]:
    keys = sorted((set(stored) | set(given)) - set(ignore))
    return [f"{k}={stored.get(k)!r} there, {given.get(k)!r} here" for k in keys if stored.get(k) != given.get(k)]


def _check_same(run_dir: Path, *, what: str, shape: Shape, config: TrainConfig, stored_shape: dict,
                stored_config: dict) -> None:
    diffs = _differences(stored_shape, shape.to_dict()) + _differences(
        with_added_fields(stored_config), config.to_dict(), ignore=(*NON_NUMERIC_FIELDS, *RESHARDABLE)
    )
    if diffs:
        raise UserError(f"{run_dir} holds {what} of a different run ({'; '.join(diffs[:4])}); "
                         "use the same settings or another folder")


def stored_result(run_dir: Path, *, shape: Shape, config: TrainConfig, dataset: Dataset,
                  resume: bool) -> TrainResult | None:
    """The finished result stored in `run_dir`, returned when resuming; None when there is none."""
    path = run_dir / RESULT
    if not path.is_file():
        return None
    if not resume:
        raise UserError(f"{run_dir} already holds a finished run ({RESULT}); "
                         "resume it to read its result, or choose another folder")
    data = read_json(path)
    _check_same(run_dir, what="the result", shape=shape, config=config, stored_shape=data.get("shape", {}),
                stored_config=data.get("config", {}))
    if data.get("dataset_hash") != dataset.dataset_hash:
        raise UserError(f"{run_dir} holds the result of a run on different data "
                         f"(dataset hash {str(data.get('dataset_hash'))[:12]}, now {dataset.dataset_hash[:12]})")
    return TrainResult.from_dict(data)


#: what a checkpoint's meta must hold for the trainer to continue from it
RESUME_KEYS = ("step", "curve", "evals", "train_seconds", "eval_seconds", "shape", "config", "dataset_hash")


def check_resumable(run_dir: Path, *, shape: Shape, config: TrainConfig, dataset: Dataset, resume: bool,
                    device: torch.device) -> tuple[dict | None, list[str]]:
    """(The checkpoint payload to resume from or None to start from step 0, the run's resume notes).

    The last readable of checkpoint.pt and checkpoint.prev.pt is used; when neither can be read the run
    starts again from step 0. Each resume adds a note saying where it continued and, when it fell back,
    why (the notes travel in the checkpoint and end in the result's `resumes`). A readable checkpoint
    of a different run is refused, never replaced."""
    started = (run_dir / CHECKPOINT).is_file() or (run_dir / RUN).is_file()
    if started and not resume:
        raise UserError(f"{run_dir} already holds a started run; resume it (--resume) or choose another folder")
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"out_dir {run_dir} is a file, not a folder")
    if not resume:
        return None, []
    unreadable: list[str] = []
    for name in (CHECKPOINT, CHECKPOINT_PREV):
        if not (run_dir / name).is_file():
            continue
        payload, why = _readable(run_dir / name, device=device)
        if payload is None:
            unreadable.append(f"{name} unreadable ({why})")
            continue
        meta = payload["meta"]
        _check_same(run_dir, what="a checkpoint", shape=shape, config=config, stored_shape=meta["shape"],
                    stored_config=meta["config"])
        if meta["dataset_hash"] != dataset.dataset_hash:
            raise UserError(f"{run_dir} holds a checkpoint trained on different data "
                            f"(dataset hash {str(meta['dataset_hash'])[:12]}, now {dataset.dataset_hash[:12]})")
        note = f"resumed at step {meta['step']} from {name}" + (f": {'; '.join(unreadable)}" if unreadable else "")
        return payload, [*meta.get("resumes", []), note]
    if unreadable:
        return None, [f"started again at step 0: {'; '.join(unreadable)}"]
    return None, []


def _readable(path: Path, *, device: torch.device) -> tuple[dict | None, str]:
    """(payload, "") of a checkpoint the trainer can continue from, or (None, why not)."""
    try:
        payload = ckpt.load_checkpoint(path, device=device)
    except UserError as exc:
        return None, str(exc).removeprefix(f"checkpoint {path} ")
    missing = [k for k in RESUME_KEYS if k not in payload["meta"]]
    if missing or not isinstance(payload.get("model"), dict) or not isinstance(payload.get("optimizer"), dict):
        return None, f"its meta lacks {', '.join(missing)}" if missing else "no model or optimizer state"
    return payload, ""


def prepare_run_dir(run_dir: Path, *, shape: Shape, config: TrainConfig, dataset: Dataset) -> None:
    """Create the folder and describe the run in run.json; a stale error.json is removed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(run_dir / RUN, {
        "depthwidth": __version__,
        "torch": torch.__version__,
        "shape": shape.to_dict(),
        "config": config.to_dict(),
        "config_hash": config.config_hash(),
        "dataset": dataset.to_dict(),
    })
    error = run_dir / ERROR
    if error.exists():
        error.unlink()
