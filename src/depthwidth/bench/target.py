"""What a benchmark measures: a `Shape` with random weights (speed only), a model from one of our
training checkpoints (speed and, for quantization, validation loss), or a local Hugging Face model
folder read into our model (`depthwidth.hf.load`; speed only, as its data is not ours)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from depthwidth.errors import UserError
from depthwidth.machine import check_fits
from depthwidth.model.transformer import Transformer, model_bytes
from depthwidth.shapes.parametrization import Multipliers, multipliers
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedTarget:
    """An fp32 model in eval mode and where it came from."""

    model: nn.Module
    shape: Shape
    label: str  # shape label, or the checkpoint path
    checkpoint: str | None  # path of the checkpoint file, None for random weights
    meta: dict[str, Any] | None  # the checkpoint's bookkeeping (train config, data), None for random weights


def load_target(target: Shape | str | Path, *, attn_impl: str = "sdpa", seed: int = 0) -> LoadedTarget:
    """A Shape -> a model with seeded random weights; a path (checkpoint file or run folder) -> the
    trained model; a Hugging Face model folder (config.json, no checkpoint.pt) -> its weights in our
    model. Raises FileNotFoundError / ValueError naming the file and what is wrong."""
    if isinstance(target, Shape):
        check_fits(model_bytes(target), what=f"the model {target.label()} (fp32 weights)")
        torch.manual_seed(seed)
        model = Transformer(target, attn_impl=attn_impl).eval()
        return LoadedTarget(model=model, shape=target, label=target.label(), checkpoint=None, meta=None)
    if isinstance(target, (str, Path)):
        if is_hf_folder(Path(target)):
            return load_hf_target(Path(target), attn_impl=attn_impl)
        return load_checkpoint_model(Path(target), attn_impl=attn_impl)
    raise UserError(f"target must be a Shape or a checkpoint path, got {type(target).__name__}")


def checkpoint_file(path: Path) -> Path:
    """The checkpoint file of `path` (itself, or checkpoint.pt inside a run folder)."""
    from depthwidth.artifact.checkpoint import CHECKPOINT

    if path.is_dir():
        inner = path / CHECKPOINT
        if not inner.is_file():
            raise FileNotFoundError(
                f"checkpoint {path} is a folder without {CHECKPOINT}; give a run folder or a .pt file"
            )
        return inner
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    return path


#: first bytes of what torch.save writes: a zip archive (default since torch 1.6) or a legacy pickle
_TORCH_MAGIC = (b"PK\x03\x04", b"\x80\x02")


def _check_file_kind(file: Path) -> None:
    """A one-line error for a file that is not a torch.save file at all (text, JSON, empty, ...)."""
    with open(file, "rb") as fh:
        head = fh.read(4)
    if not head.startswith(_TORCH_MAGIC):
        shown = head.decode("ascii", "replace").encode("unicode_escape").decode() or "nothing"
        raise UserError(
            f"checkpoint {file} is not a PyTorch checkpoint (it starts with {shown!r}); "
            "expected a checkpoint.pt written by depthwidth train"
        )


def load_checkpoint_model(path: Path, *, attn_impl: str = "sdpa") -> LoadedTarget:
    """Rebuild the trained model of one of our checkpoints (read with weights_only=True)."""
    from depthwidth.artifact.checkpoint import check_state, load_checkpoint

    file = checkpoint_file(path)
    _check_file_kind(file)
    try:
        payload = load_checkpoint(file, device=torch.device("cpu"))  # ValueError for foreign/corrupt files
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:  # right format tag, wrong content
        raise UserError(f"checkpoint {file} is not a depthwidth checkpoint ({type(exc).__name__}: {exc})") from None
    meta = payload.get("meta")
    state = payload.get("model")
    if not isinstance(meta, dict) or not isinstance(state, dict):
        raise UserError(f"checkpoint {file} is not a depthwidth checkpoint: no model state and meta")
    shape_dict = meta.get("shape")
    if shape_dict is None:
        has = ", ".join(sorted(meta)) or "nothing"
        raise UserError(f"checkpoint {file} does not record its shape (meta has {has})")
    try:
        shape = Shape.from_dict(shape_dict)
    except (TypeError, ValueError) as exc:
        raise UserError(f"checkpoint {file} has an invalid shape: {exc}") from None
    check_state(state, shape, source=f"checkpoint {file}")  # names and sizes, before anything is built
    check_fits(model_bytes(shape), what=f"checkpoint {file}'s model {shape.label()} (fp32 weights)")
    scaling = trained_scaling(meta, shape, source=f"checkpoint {file}")
    model = Transformer(shape, attn_impl=attn_impl, scaling=scaling)
    model.load_state_dict(state)
    return LoadedTarget(model=model.float().eval(), shape=shape, label=str(file), checkpoint=str(file), meta=meta)


def trained_scaling(meta: dict[str, Any], shape: Shape, *, source: str) -> Multipliers:
    """The forward multipliers (residual branches, logits, attention scale) of the parametrization the
    run trained under, read from its recorded config: a muP or CompleteP model rebuilt as SP would compute
    other logits from the same weights. A checkpoint without a parametrization is SP."""
    config = meta.get("config")
    config = config if isinstance(config, dict) else {}
    for key in ("base_width", "base_depth"):
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UserError(f"{source}: config {key}={value!r} must be a positive integer or null")
    try:
        return multipliers(config.get("parametrization", "sp"), d_model=shape.d_model, n_layers=shape.n_layers,
                           head_dim=shape.head_dim, base_width=config.get("base_width"),
                           base_depth=config.get("base_depth"), norm_position=shape.norm_position)
    except (UserError, TypeError) as exc:
        raise UserError(f"{source}: {exc}") from None


def is_hf_folder(path: Path) -> bool:
    """A folder with a Hugging Face config.json and none of our checkpoints."""
    from depthwidth.artifact.checkpoint import CHECKPOINT

    return path.is_dir() and (path / "config.json").is_file() and not (path / CHECKPOINT).is_file()


def load_hf_target(folder: Path, *, attn_impl: str = "sdpa") -> LoadedTarget:
    """A local Hugging Face checkpoint in our model. Timing needs no exact import: what our model would
    compute differently (an erf GELU, partial rotary) is named in the label instead of refused."""
    from depthwidth.hf.load import load_hf_model

    model, info = load_hf_model(folder, exact=False, attn_impl=attn_impl)
    label = f"{folder} ({info.model_type}" + (f"; timed as our model: {'; '.join(info.mismatches)})"
                                              if info.mismatches else ")")
    return LoadedTarget(model=model, shape=info.shape, label=label, checkpoint=str(folder), meta=None)


def variant_model(loaded: LoadedTarget, variant: str) -> nn.Module:
    """The model to time for `variant` ("fp32" | "bf16" | "fp16" | "int8"), in eval mode: the loaded
    model itself for fp32, a bf16 or fp16 copy, or an int8 dynamically quantized copy (`bench.quantize`).
    `loaded.model` stays fp32 and unchanged."""
    if variant == "int8":
        from depthwidth.bench.quantize import quantize_int8

        return quantize_int8(loaded.model).eval()
    if variant == "fp32":
        return loaded.model.eval()
    if variant in ("bf16", "fp16"):  # (fp16 on CUDA only: the bench refuses it on a CPU)
        return copy.deepcopy(loaded.model).to(torch.bfloat16 if variant == "bf16" else torch.float16).eval()
    raise ValueError(f"variant={variant!r} is not one of fp32, bf16, fp16, int8")


__all__ = ["LoadedTarget", "checkpoint_file", "is_hf_folder", "load_checkpoint_model", "load_hf_target", "load_target",
           "variant_model"]
