"""A local Hugging Face model folder: its files, its weights (safetensors only), its content hash.

A folder holds `config.json` and either `model.safetensors` or shards listed by
`model.safetensors.index.json`. Weights are read only as safetensors, a format of plain tensors that
runs no code: a folder with only pickle checkpoints (`pytorch_model.bin`, `*.pt`, `*.pth`, `*.ckpt`)
is refused with one line, since unpickling an untrusted file can run anything. The content hash is
the sha256 of config.json and every weight file (names and bytes), so a run that starts from a folder
can tell when that folder has changed under the same path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import torch

from depthwidth.errors import UserError
from depthwidth.files import atomic_write

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_CHUNK = 1 << 22


def model_folder(path: str | os.PathLike) -> Path:
    """`path` as a model folder holding config.json; a UserError naming what is missing otherwise."""
    folder = Path(path)
    if not folder.exists():
        raise UserError(f"{folder}: no such Hugging Face model folder")
    if not folder.is_dir():
        raise UserError(f"{folder} is a file; give the Hugging Face model folder (config.json and "
                        f"{WEIGHTS})")
    if not (folder / CONFIG).is_file():
        raise UserError(f"{folder} has no {CONFIG}; a Hugging Face model folder holds {CONFIG} and {WEIGHTS}")
    return folder


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a model folder, in shard order; a UserError for pickles or nothing."""
    if (folder / WEIGHTS).is_file():
        return [folder / WEIGHTS]
    if (folder / INDEX).is_file():
        try:
            index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
            shards = sorted(set(index["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"{folder / INDEX}: not a safetensors index ({type(exc).__name__}: {exc})") from None
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise UserError(f"{folder / INDEX} lists {missing[0]}, which is not in the folder")
        return [folder / s for s in shards]
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise UserError(f"{folder}: {pickles[0]} is a pickle checkpoint, which is never loaded (unpickling can run "
                        f"code); convert it to {WEIGHTS} first")
    raise UserError(f"{folder} has no {WEIGHTS} (nor {INDEX}); only safetensors weights are read")


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files, on the CPU."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for file in weight_files(folder):
        try:
            tensors.update(load_file(file, device="cpu"))
        except (SafetensorError, OSError, ValueError) as exc:
            raise UserError(f"{file} is not a readable safetensors file ({exc})") from None
    return tensors


def write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write `tensors` as one safetensors file (metadata format "pt", as transformers writes), atomically."""
    from safetensors.torch import save_file

    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))


def _file_digest(path: Path, digest) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)


@functools.lru_cache(maxsize=64)
def _cached_hash(folder: str, stamp: tuple) -> str:
    path = Path(folder)
    digest = hashlib.sha256()
    for file in [path / CONFIG, *weight_files(path)]:
        digest.update(file.name.encode() + b"\0")
        _file_digest(file, digest)
    return digest.hexdigest()


def content_hash(path: str | os.PathLike) -> str:
    """sha256 of the folder's config.json and weight files. Cached per process by the files' sizes and
    modification times, so a study hashing one folder for many runs reads it once."""
    folder = model_folder(path).resolve()
    files = [folder / CONFIG, *weight_files(folder)]
    stamp = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _cached_hash(str(folder), stamp)


__all__ = ["CONFIG", "INDEX", "WEIGHTS", "content_hash", "model_folder", "read_weights",
           "weight_files", "write_weights"]
