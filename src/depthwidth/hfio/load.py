"""A local Hugging Face checkpoint -> our model: the shape from its `config.json` (the existing HF config
import, `depthwidth.shapes.hf`), the weights from safetensors re-laid out by `depthwidth.hfio.layout`.

An export of ours records our shape in config.json ("depthwidth"); when that shape differs from the
config's only by biases the class always has and those biases are still all zero, the import gives
back our bias-free shape, so export -> import is the identity. Otherwise the config's shape is used
(a model fine-tuned elsewhere, whose biases moved, is imported as the class holds it).

`exact=True` (training from a checkpoint) refuses a config our model would compute differently
(`arch.import_mismatches`: an erf GELU, partial rotary, scaled RoPE, a sliding window); `exact=False`
(timing only) accepts it and lists the differences in `HFCheckpoint.mismatches`.

Nothing of a hostile folder is trusted: config.json, the shard index and tokenizer_config.json are read
bounded (`depthwidth.files`: a size limit, regular files only, bounded nesting), and every tensor's name,
dtype and size is checked against the config from the safetensors headers before its data is read
(`depthwidth.hfio.layout.check_tensors`), then its values (no NaN or infinity) before any module is built.
Before any tensor is read, what the import holds at once - the fp32 state read and the module built from
it, 2 x `model_bytes` of the config's shape, a lower bound - is checked against free memory
(`machine.check_fits`), so a checkpoint too large for the machine is one line, not a swapped machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from depthwidth.errors import UserError
from depthwidth.files import file_kind, read_json_object
from depthwidth.hfio.arch import CLASSES, Arch, import_mismatches
from depthwidth.hfio.layout import check_tensors, expected_state, from_hf_state
from depthwidth.hfio.tokenizer import TOKENIZER_CONFIG
from depthwidth.hfio.weights import CONFIG, content_hash, model_folder, read_header, read_tensors
from depthwidth.hfconfig import read_hf_config
from depthwidth.machine import check_fits
from depthwidth.model.transformer import Transformer, model_bytes
from depthwidth.shapes.hf import shape_from_hf_config
from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class HFCheckpoint:
    """A Hugging Face model folder read into our terms."""

    folder: str
    model_type: str
    shape: Shape
    state: dict[str, torch.Tensor] = field(repr=False)  # our parameter names, fp32
    sha256: str  # `weights.content_hash` of the folder
    tokenizer_fingerprint: str | None  # our tokenizer's, when the folder is an export of ours
    mismatches: tuple[str, ...] = ()  # what our model computes differently (only with exact=False)


def _recorded_shape(config: dict, shape: Shape, state: dict[str, torch.Tensor]) -> tuple[Shape, dict]:
    """Our recorded shape and its state when the config's shape only adds biases that are all zero."""
    try:
        recorded = Shape.from_dict(config["depthwidth"]["shape"])
    except (KeyError, TypeError, ValueError):
        return shape, state
    if recorded == shape or recorded.with_(bias=shape.bias) != shape:
        return shape, state
    keep = expected_state(recorded)
    if any(bool(t.any()) for name, t in state.items() if name not in keep):
        return shape, state
    return recorded, {name: t for name, t in state.items() if name in keep}


def _tokenizer_fingerprint(folder: Path) -> str | None:
    """Our tokenizer's fingerprint recorded in tokenizer_config.json (an export of ours), else None."""
    path = folder / TOKENIZER_CONFIG
    if file_kind(path) == "missing":
        return None
    value = read_json_object(path, what="tokenizer config").get("depthwidth_fingerprint")
    return value if isinstance(value, str) else None


def _read_state(folder: Path, arch: Arch) -> dict[str, torch.Tensor]:
    """The folder's weights in our names: names, dtypes and sizes checked from the headers first, then
    only the tensors the class needs are read."""
    infos = read_header(folder)
    chosen = check_tensors({k: (i.dtype, i.shape) for k, i in infos.items()}, arch, source=str(folder))
    tensors = read_tensors(infos, chosen.values())
    return from_hf_state({theirs: tensors[name] for theirs, name in chosen.items()}, arch, source=str(folder))


def read_hf_checkpoint(path: str | os.PathLike, *, exact: bool = True) -> HFCheckpoint:
    """Read a model folder (config.json + safetensors). One-line UserErrors: no folder, no config.json,
    a pickle checkpoint, an unsupported model_type, weights that do not fit, an inexact import."""
    folder = model_folder(path)
    source = str(folder / CONFIG)
    config = read_hf_config(folder)
    shape = shape_from_hf_config(config, source=source)
    mismatches = tuple(import_mismatches(config, source=source))
    if exact and mismatches:
        raise UserError(f"{source}: {mismatches[0]}; our model would not compute this checkpoint exactly, so it "
                        "is not trained from")
    model_type = config["model_type"]
    arch = Arch(model_type=model_type, class_name=CLASSES[model_type], hf_shape=shape)
    check_fits(2 * model_bytes(shape), what=f"{folder}: the {model_type} model {shape.label()} (its fp32 weights "
                                            "read, and the model built from them)")
    state = _read_state(folder, arch)
    shape, state = _recorded_shape(config, shape, state)
    return HFCheckpoint(folder=str(folder), model_type=model_type, shape=shape, state=state,
                        sha256=content_hash(folder), tokenizer_fingerprint=_tokenizer_fingerprint(folder),
                        mismatches=mismatches)


def load_hf_model(path: str | os.PathLike, *, exact: bool = True,
                  attn_impl: str = "sdpa") -> tuple[Transformer, HFCheckpoint]:
    """Our fp32 model (eval mode) holding the folder's weights, and what was read."""
    checkpoint = read_hf_checkpoint(path, exact=exact)
    model = Transformer(checkpoint.shape, attn_impl=attn_impl)
    model.load_state_dict(checkpoint.state, strict=True)
    return model.eval(), checkpoint


__all__ = ["HFCheckpoint", "load_hf_model", "read_hf_checkpoint"]
