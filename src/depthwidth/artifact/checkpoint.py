"""Atomic checkpoints of a run folder (the folder's files are named in `depthwidth.artifact.folder`).

A checkpoint holds model, optimizer and RNG states plus `meta`, rewritten atomically
(`depthwidth.files.atomic_write`: temporary file, fsync, rename), the previous one kept as
checkpoint.prev.pt. Checkpoints hold tensors and plain Python values only and are read with
torch.load(weights_only=True) (memory-mapped, so a large file is not read into memory to be checked),
from the file `files.open_regular` checked (a regular file, opened without blocking: a named pipe or a
device is one line, never a hang; the mapping is of that very file, `files.pinned_path`);
a file that is not one (truncated, random, pickled objects, wrong types) is one UserError naming it.
Non-tensor bookkeeping travels as one JSON string.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from depthwidth.errors import UserError
from depthwidth.artifact.folder import CHECKPOINT_PREV
from depthwidth.files import atomic_write, loads, open_regular, pinned_path

CHECKPOINT_FORMAT = 1


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
    write_checkpoint(path, model_state=model.state_dict(), optimizer_state=optimizer.state_dict(),
                     rng=rng_state(device), meta=meta)


def write_checkpoint(path: Path, *, model_state: dict, optimizer_state: dict, rng: dict[str, torch.Tensor],
                     meta: dict[str, Any]) -> None:
    """The one writer of checkpoint files: the states, the RNG and `meta` as one JSON string, written
    atomically with the previous file kept as checkpoint.prev.pt."""
    payload = {"format": CHECKPOINT_FORMAT, "model": model_state, "optimizer": optimizer_state, "rng": rng,
               "meta": json.dumps(meta, allow_nan=True)}
    atomic_write(path, lambda tmp: torch.save(payload, tmp), previous=path.with_name(CHECKPOINT_PREV))


#: first bytes of a zip archive, what torch.save writes (and what torch.load can memory-map)
ZIP_MAGIC = b"PK\x03\x04"
#: the largest checkpoint file opened: a zip is memory-mapped, not read, and its model must then pass the
#: memory check (`machine.check_fits`); 1 TiB is above the fp32 weights and AdamW moments of a 50B-parameter model
MAX_CHECKPOINT_BYTES = 1 << 40


def load_checkpoint(path: Path, *, device: torch.device | None = None) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` (weights_only=True, memory-mapped); meta is
    decoded. Anything else - truncated, random bytes, pickled objects, the right tag with the wrong
    content - is one UserError naming the file.

    Every tensor is loaded onto the CPU, whatever `device` the run is on (the argument is kept for the
    callers that name it): `model.load_state_dict` copies weights onto the parameters' device, and
    `optimizer.load_state_dict` moves the moments there while AdamW's `step` counters stay CPU tensors
    (as torch keeps them for the foreach kernel; loading them onto a GPU would cost host syncs every
    step). RNG states must be CPU ByteTensors anyway."""
    with open_regular(path, what="checkpoint", max_bytes=MAX_CHECKPOINT_BYTES) as fh:
        zipped = fh.read(4) == ZIP_MAGIC
        fh.seek(0)
        # a zip is memory-mapped through the checked descriptor; anything else is read from the open file
        source = pinned_path(fh) if zipped else fh
        try:
            with warnings.catch_warnings():  # torch's advice about an odd file: the file is judged below instead
                warnings.simplefilter("ignore")
                payload = torch.load(source, map_location="cpu", weights_only=True, mmap=zipped)
        except pickle.UnpicklingError as exc:  # weights_only met a Python object: never retry without it
            why = re.search(r"WeightsUnpickler error: ([^.]*)", str(exc))
            raise UserError(f"checkpoint {path} holds Python objects that a weights-only load refuses"
                            f"{f' ({why.group(1)})' if why else ''}; depthwidth never runs code from a checkpoint, "
                            "expected a checkpoint.pt written by depthwidth train") from None
        except Exception as exc:  # a corrupt or foreign file: say which, in one line
            text = str(exc).replace(source, str(path)) if isinstance(source, str) else str(exc)
            first = text.strip().split(". ")[0].splitlines()[0] if text.strip() else ""
            raise UserError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {first})") from None
    if not isinstance(payload, dict) or "format" not in payload:
        raise UserError(f"checkpoint {path} is not a depthwidth checkpoint (no format recorded; this version reads "
                        f"checkpoint format {CHECKPOINT_FORMAT})")
    if type(payload["format"]) is not int or payload["format"] != CHECKPOINT_FORMAT:
        shown = repr(payload["format"])
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise UserError(f"checkpoint {path} is of checkpoint format {shown}; this version of depthwidth reads "
                        f"format {CHECKPOINT_FORMAT} only")
    meta, rng = payload.get("meta"), payload.get("rng")
    payload["meta"] = loads(meta, source=f"checkpoint {path}: meta") if isinstance(meta, str) else None
    if not isinstance(payload["meta"], dict) or not isinstance(rng, dict) or \
            not all(isinstance(v, torch.Tensor) for v in rng.values()):
        raise UserError(f"checkpoint {path} is not a depthwidth checkpoint: its meta or RNG state is malformed")
    payload["rng"] = {k: v.cpu() for k, v in rng.items()}
    return payload


def check_state(state: Any, shape, *, source: str) -> None:
    """Refuse a state dict that `Transformer(shape)` could not load - a missing, extra, non-tensor or
    wrongly sized entry - before any module is built: the sizes come from `state_shapes` (a one-block
    model on the meta device), so a file claiming a huge shape costs nothing to refuse."""
    from depthwidth.model.transformer import state_shapes

    if not isinstance(state, dict):
        raise UserError(f"{source}: no model state (a dict of tensors)")
    expected = state_shapes(shape)
    missing = [k for k in expected if k not in state]
    extra = [k for k in state if k not in expected]
    if missing or extra:
        which = f"lacks {missing[0]!r}" if missing else f"has {str(extra[0])[:60]!r}, which it does not have"
        raise UserError(f"{source}: its weights do not fit its shape {shape.label()}: the state ({len(state)} "
                        f"tensors) {which} ({len(expected)} tensors expected)")
    for name, size in expected.items():
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point() or tuple(tensor.shape) != size:
            got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise UserError(f"{source}: its weights do not fit its shape {shape.label()}: {name} is {got}, "
                            f"expected a float tensor of {size}")
