"""What a benchmark measures: a `Shape` with random weights (speed only), a model from one of our
training checkpoints (speed and, for quantization, validation loss), or a local Hugging Face model
folder read into our model (`depthwidth.hfio.load`; speed only, as its data is not ours). Nothing here
opens a file itself: a checkpoint is read by `artifact.load_trained`, an HF folder by `hfio.load`, both
through the checked reader of `depthwidth.files`."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.artifact.load import load_trained
from depthwidth.artifact.records import CheckpointMeta
from depthwidth.errors import UserError
from depthwidth.files import file_kind
from depthwidth.machine import check_fits
from depthwidth.model.transformer import Transformer, model_bytes
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedTarget:
    """An fp32 model in eval mode and where it came from."""

    model: nn.Module
    shape: Shape
    label: str  # shape label, or the checkpoint path
    checkpoint: str | None  # path of the checkpoint file, None for random weights
    meta: CheckpointMeta | None  # a trained checkpoint's bookkeeping; None for random weights and HF folders
    config: TrainConfig | None = None  # the run's recorded config (a trained checkpoint that records one)


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


def load_checkpoint_model(path: Path, *, attn_impl: str = "sdpa") -> LoadedTarget:
    """The trained model of one of our run folders or checkpoints (`depthwidth.artifact.load_trained`: every
    check of an untrusted file, the run's own forward multipliers)."""
    run = load_trained(Path(path), attn_impl=attn_impl)
    return LoadedTarget(model=run.model, shape=run.shape, label=run.label, checkpoint=str(run.checkpoint),
                        meta=run.meta, config=run.config)


def is_hf_folder(path: Path) -> bool:
    """A folder with a Hugging Face config.json and no checkpoint.pt of ours (a checkpoint.pt that is a pipe
    or a folder makes it a run folder, whose reading then names what that checkpoint.pt is)."""
    return path.is_dir() and (path / "config.json").is_file() and file_kind(path / CHECKPOINT) == "missing"


def load_hf_target(folder: Path, *, attn_impl: str = "sdpa") -> LoadedTarget:
    """A local Hugging Face checkpoint in our model. Timing needs no exact import: what our model would
    compute differently (an erf GELU, partial rotary) is named in the label instead of refused."""
    from depthwidth.hfio.load import load_hf_model

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


__all__ = ["LoadedTarget", "is_hf_folder", "load_checkpoint_model", "load_hf_target", "load_target",
           "variant_model"]
