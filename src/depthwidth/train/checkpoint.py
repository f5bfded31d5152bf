"""Run folders and atomic checkpoints.

A run folder holds:
    run.json        what the run is (shape, config, dataset), written when it starts;
    checkpoint.pt   model, optimizer and RNG states plus `meta` (step, curve, evals, ...),
                    rewritten atomically (temporary file + os.replace) every `checkpoint_every`
                    steps and at the end;
    result.json     the TrainResult, written atomically only when the run has ended as
                    "completed" or "diverged" - its presence is what "finished" means;
    error.json      written instead when the run failed (the checkpoint stays for a resume).
Checkpoints hold tensors and plain Python values only and are read with
torch.load(weights_only=True). Non-tensor bookkeeping travels as one JSON string.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from depthwidth.errors import UserError

CHECKPOINT = "checkpoint.pt"
RESULT = "result.json"
RUN = "run.json"
ERROR = "error.json"
CHECKPOINT_FORMAT = 1


def atomic_write_bytes_via(path: Path, write) -> None:
    """Call write(tmp_path), then rename tmp_path over `path` (same folder, so atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes_via(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=1, allow_nan=False)))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, torch.Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def save_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    meta: dict[str, Any],
) -> None:
    """Write a checkpoint atomically. `meta` must be JSON-serialisable (step, curve, config...)."""
    payload = {
        "format": CHECKPOINT_FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": rng_state(device),
        "meta": json.dumps(meta, allow_nan=True),
    }
    atomic_write_bytes_via(path, lambda tmp: torch.save(payload, tmp))


def load_checkpoint(path: Path, *, device: torch.device) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` (weights_only=True); meta is decoded."""
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # a corrupt or foreign file: say which
        raise UserError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise UserError(f"checkpoint {path} is not a depthwidth checkpoint (format {CHECKPOINT_FORMAT})")
    payload["meta"] = json.loads(payload["meta"])
    # RNG states must stay on the CPU as ByteTensors whatever map_location says.
    payload["rng"] = {k: v.cpu() for k, v in payload["rng"].items()}
    return payload
