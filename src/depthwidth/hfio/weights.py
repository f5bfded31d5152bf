"""A local Hugging Face model folder: its files, its weights (safetensors only), its content hash.

A folder holds `config.json` and either `model.safetensors` or shards listed by
`model.safetensors.index.json`. Weights are read only as safetensors, a format of plain tensors that
runs no code: a folder with only pickle checkpoints (`pytorch_model.bin`, `*.pt`, `*.pth`, `*.ckpt`)
is refused with one line, since unpickling an untrusted file can run anything. The content hash is
the sha256 of config.json and every weight file (names and bytes), so a run that starts from a folder
can tell when that folder has changed under the same path.

What a hostile folder can hold is refused with one line before any tensor is read:
- a file that is a folder, a device or a FIFO where a file is expected (named as such, not "missing");
- an index (read bounded by `depthwidth.files`) whose `weight_map` is not an object of tensor name ->
  shard file name, or names a shard outside the folder: an absolute path, a `..`, or a symbolic link
  that leads out (except into the Hugging Face hub cache's `blobs/`, where every file of a
  `snapshots/<revision>/` folder links); every shard is checked before any is opened;
- a safetensors header larger than `MAX_HEADER_BYTES`, or a tensor name in two shards.
`read_header` gives every tensor's dtype and size from the headers alone, so the import checks them
against the config (`depthwidth.hfio.layout.check_tensors`) before reading the data (`read_tensors`).
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import torch

from depthwidth.errors import UserError, echo
from depthwidth.files import atomic_write, file_kind, read_json_object
from depthwidth.shapes.checks import shown

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
#: the largest safetensors header read: a real one takes about 100 bytes per tensor
MAX_HEADER_BYTES = 16 * 1024**2
#: safetensors dtype names -> torch dtypes (what the import can read; only the floating ones are weights)
SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                      "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "BOOL": torch.bool,
                      "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64}
_CHUNK = 1 << 22


@dataclass(frozen=True, kw_only=True, slots=True)
class TensorInfo:
    """One tensor as a safetensors header describes it (nothing of its data read)."""

    file: Path
    dtype: torch.dtype | str  # the safetensors name when torch has no such dtype
    shape: tuple[int, ...]


def model_folder(path: str | os.PathLike) -> Path:
    """`path` as a model folder holding config.json; a UserError naming what is missing otherwise."""
    folder = Path(path)
    kind = file_kind(folder)
    if kind == "missing":
        raise UserError(f"{folder}: no such Hugging Face model folder")
    if kind != "a folder":
        raise UserError(f"{folder} is {kind or 'a file'}; give the Hugging Face model folder (config.json and "
                        f"{WEIGHTS})")
    kind = file_kind(folder / CONFIG)
    if kind == "missing":
        raise UserError(f"{folder} has no {CONFIG}; a Hugging Face model folder holds {CONFIG} and {WEIGHTS}")
    if kind is not None:
        raise UserError(f"{folder / CONFIG} is {kind}, not a file; a Hugging Face model folder holds {CONFIG} "
                        f"and {WEIGHTS}")
    return folder


def _allowed_roots(folder: Path) -> tuple[Path, ...]:
    root = folder.resolve()
    if root.parent.name == "snapshots":  # the hub cache: snapshots/<revision>/<file> -> ../../blobs/<hash>
        return root, root.parent.parent / "blobs"
    return (root,)


def _shard_file(folder: Path, shard: str, *, index: Path, roots: tuple[Path, ...]) -> Path:
    name = PurePosixPath(shard)
    if not shard.strip() or "\0" in shard or "\\" in shard or name.is_absolute() or ".." in name.parts:
        raise UserError(f"{index}: shard {shown(shard)} is not a file name inside the model folder (no absolute "
                        "path, no '..')")
    file = folder / name
    resolved = file.resolve()
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise UserError(f"{index}: shard {shown(shard)} is a link to {echo(resolved)}, outside the model "
                        "folder")
    kind = file_kind(file)
    if kind == "missing":
        raise UserError(f"{index} lists {shown(shard)}, which is not in the folder")
    if kind is not None:
        raise UserError(f"{file} is {kind}, not a safetensors file")
    return file


def _shards(folder: Path) -> list[Path]:
    path = folder / INDEX
    index = read_json_object(path, what="safetensors index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise UserError(f"{path}: 'weight_map' = {shown(weight_map)}; expected an object of tensor name -> shard "
                        "file name")
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise UserError(f"{path}: weight_map[{shown(name)}] = {shown(shard)}; expected a shard file name "
                            "(a string)")
    roots = _allowed_roots(folder)
    return [_shard_file(folder, s, index=path, roots=roots) for s in sorted(set(weight_map.values()))]


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a model folder, in shard order; a UserError for pickles or nothing."""
    kind = file_kind(folder / WEIGHTS)
    if kind is None:
        return [folder / WEIGHTS]
    if kind != "missing":
        raise UserError(f"{folder / WEIGHTS} is {kind}, not a safetensors file")
    if file_kind(folder / INDEX) != "missing":  # read_json_object names a folder, device or FIFO
        return _shards(folder)
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise UserError(f"{folder}: {echo(pickles[0])} is a pickle checkpoint, which is never loaded (unpickling "
                        f"can run code); convert it to {WEIGHTS} first")
    raise UserError(f"{folder} has no {WEIGHTS} (nor {INDEX}); only safetensors weights are read")


def _unreadable(file: Path, exc: BaseException) -> UserError:
    return UserError(f"{file} is not a readable safetensors file ({str(exc)[:200]})")


def _file_header(file: Path) -> dict[str, TensorInfo]:
    from safetensors import SafetensorError, safe_open

    with open(file, "rb") as fh:
        size = fh.read(8)
    if len(size) < 8:
        raise UserError(f"{file} is not a readable safetensors file ({len(size)} bytes, shorter than a header)")
    if int.from_bytes(size, "little") > MAX_HEADER_BYTES:
        raise UserError(f"{file} is not a readable safetensors file (a header of {int.from_bytes(size, 'little'):,} "
                        f"bytes, more than {MAX_HEADER_BYTES:,})")
    try:
        with safe_open(str(file), framework="pt", device="cpu") as st:
            out = {}
            for name in st.keys():
                part = st.get_slice(name)
                dtype = part.get_dtype()
                out[name] = TensorInfo(file=file, dtype=SAFETENSORS_DTYPES.get(dtype, dtype),
                                       shape=tuple(part.get_shape()))
            return out
    except (SafetensorError, OSError, ValueError) as exc:
        raise _unreadable(file, exc) from None


def read_header(folder: Path) -> dict[str, TensorInfo]:
    """Every tensor of the folder's safetensors files, as their headers describe it (no data read)."""
    out: dict[str, TensorInfo] = {}
    for file in weight_files(folder):
        for name, info in _file_header(file).items():
            if name in out:
                raise UserError(f"{folder}: tensor {shown(name)} is in both {out[name].file.name} and {file.name}")
            out[name] = info
    return out


def read_tensors(infos: dict[str, TensorInfo], names) -> dict[str, torch.Tensor]:
    """The tensors `names` (of `read_header`'s `infos`), on the CPU; nothing else is read."""
    from safetensors import SafetensorError, safe_open

    by_file: dict[Path, list[str]] = {}
    for name in names:
        by_file.setdefault(infos[name].file, []).append(name)
    out = {}
    for file, wanted in by_file.items():
        try:
            with safe_open(str(file), framework="pt", device="cpu") as st:
                out.update({name: st.get_tensor(name) for name in wanted})
        except (SafetensorError, OSError, ValueError) as exc:
            raise _unreadable(file, exc) from None
    return out


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors files, on the CPU."""
    infos = read_header(folder)
    return read_tensors(infos, list(infos))


def write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Write `tensors` as one safetensors file (metadata format "pt", as transformers writes), atomically.
    The bytes are made in memory and written by Python, so a full disk is an `OSError` naming the file."""
    from safetensors.torch import save

    data = save(tensors, metadata={"format": "pt"})
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


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


__all__ = ["CONFIG", "INDEX", "MAX_HEADER_BYTES", "SAFETENSORS_DTYPES", "TensorInfo", "WEIGHTS", "content_hash",
           "model_folder", "read_header", "read_tensors", "read_weights", "weight_files", "write_weights"]
