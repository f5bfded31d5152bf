"""`load_trained(path) -> TrainedRun`: a trained run rebuilt from its folder (or checkpoint file), once, with
every check an untrusted file needs, for every reader (bench, hf export, a study's export, inspect).

In order, before any module is built: the file is a checkpoint (`checkpoint.pt` in a run folder, or a
file; a regular file, opened through `files.open_regular`, so a pipe or a device is refused and never
blocks; a torch zip, read with weights_only=True), its meta is a `CheckpointMeta`, its recorded shape is a
valid `Shape` within the size limits, its tensors are exactly the tensors of that shape
(`checkpoint.check_state`), the model fits in memory (`machine.check_fits`), and its recorded config is a
valid `TrainConfig`. The model is then `artifact.model.build_model(shape, config)` - the trainer's own
builder - so its forward pass (parametrization multipliers included) is the trained one. A reader never
re-types a default of the recorded config: it reads `TrainedRun.config`.

A checkpoint that records no config (not written by `depthwidth train`) has `config` None and is rebuilt
with the defaults of `TrainConfig`'s forward settings (standard parametrization).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from depthwidth.artifact.checkpoint import MAX_CHECKPOINT_BYTES, ZIP_MAGIC, check_state, load_checkpoint
from depthwidth.artifact.config import TrainConfig, with_added_fields
from depthwidth.artifact.folder import checkpoint_file, is_finished, run_folder
from depthwidth.artifact.model import build_model
from depthwidth.artifact.records import CheckpointMeta
from depthwidth.errors import UserError
from depthwidth.files import read_head
from depthwidth.machine import check_fits
from depthwidth.model.transformer import Transformer, model_bytes
from depthwidth.shapes.parametrization import Multipliers
from depthwidth.shapes.shape import Shape

#: first bytes of what torch.save writes: a zip archive (default since torch 1.6) or a legacy pickle
TORCH_MAGIC = (ZIP_MAGIC, b"\x80\x02")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainedRun:
    """A trained model (fp32, eval mode) and what it is."""

    model: Transformer
    shape: Shape
    config: TrainConfig | None  # the recorded config; None for a checkpoint that records none
    multipliers: Multipliers  # the forward multipliers it trained with (`model.scaling`)
    meta: CheckpointMeta
    checkpoint: Path  # the checkpoint file read
    folder: Path  # its run folder
    finished: bool  # the run had ended with a result (result.json) when read

    @property
    def step(self) -> int:
        return self.meta.step

    @property
    def label(self) -> str:
        return str(self.checkpoint)


def recorded_config(meta: CheckpointMeta, *, source: str) -> TrainConfig | None:
    """The `TrainConfig` a checkpoint records (None when it records none); an invalid one is one line."""
    if meta.config is None:
        return None
    try:
        return TrainConfig.from_dict(with_added_fields(meta.config))
    except (UserError, TypeError, ValueError) as exc:
        raise UserError(f"{source}: its recorded config is not a valid train config: {exc}") from None


def _check_file_kind(file: Path) -> None:
    """A one-line error for a file that is not a torch.save file at all (text, JSON, empty, ...)."""
    head = read_head(file, 4, what="checkpoint", max_bytes=MAX_CHECKPOINT_BYTES)
    if not head.startswith(TORCH_MAGIC):
        shown = head.decode("ascii", "replace").encode("unicode_escape").decode() or "nothing"
        raise UserError(f"checkpoint {file} is not a PyTorch checkpoint (it starts with {shown!r}); "
                        "expected a checkpoint.pt written by depthwidth train")


def read_trained_meta(path: str | Path) -> tuple[Path, dict, CheckpointMeta, Shape]:
    """(checkpoint file, payload, meta, shape) of a run folder or checkpoint, checked as `load_trained` does
    but without building anything."""
    file = checkpoint_file(Path(path))
    _check_file_kind(file)
    payload = load_checkpoint(file, device=torch.device("cpu"))
    source = f"checkpoint {file}"
    if not isinstance(payload.get("model"), dict):
        raise UserError(f"{source} is not a depthwidth checkpoint: no model state and meta")
    raw = payload["meta"]
    if raw.get("shape") is None:
        raise UserError(f"{source} does not record its shape (meta has {', '.join(sorted(raw)) or 'nothing'})")
    try:
        shape = Shape.from_dict(raw["shape"])
    except (TypeError, ValueError) as exc:  # UserError is a ValueError
        raise UserError(f"{source} has an invalid shape: {exc}") from None
    meta = CheckpointMeta.from_dict(raw, source=source)
    return file, payload, meta, shape


def load_trained(path: str | Path, *, attn_impl: str | None = None) -> TrainedRun:
    """The trained run of `path` (a run folder or a checkpoint file); see the module docstring.
    `attn_impl` overrides the run's attention kernel (a benchmark may time another one)."""
    file, payload, meta, shape = read_trained_meta(path)
    source = f"checkpoint {file}"
    check_state(payload["model"], shape, source=source)  # names and sizes, before anything is built
    check_fits(model_bytes(shape), what=f"{source}'s model {shape.label()} (fp32 weights)")
    config = recorded_config(meta, source=source)
    forward = config if config is not None else _DEFAULT_FORWARD
    try:
        model = build_model(shape, forward, attn_impl=attn_impl)
    except UserError as exc:  # a parametrization the shape cannot take
        raise UserError(f"{source}: {exc}") from None
    model.load_state_dict(payload["model"])
    return TrainedRun(model=model.float().eval(), shape=shape, config=config, multipliers=model.scaling, meta=meta,
                      checkpoint=file, folder=run_folder(file), finished=is_finished(file))


#: the forward settings of a checkpoint that records no config: TrainConfig's defaults
_DEFAULT_FORWARD = TrainConfig(steps=1)

__all__ = ["TORCH_MAGIC", "TrainedRun", "load_trained", "read_trained_meta", "recorded_config"]
