"""A run folder: the names of the files a trained run keeps, in one place (no torch).

    run.json            what the run is (shape, config, config hash, dataset), written when it starts;
    checkpoint.pt       model, optimizer and RNG states plus `meta` (`depthwidth.artifact.records.CheckpointMeta`),
                        rewritten atomically every `checkpoint_every` steps and at the end;
    checkpoint.prev.pt  the checkpoint before it (moved aside just before the new one takes its place), so a
                        resume has a second, older point when the last one is unreadable;
    dcp/                the sharded checkpoints of a multi-process run (torch.distributed.checkpoint), which
                        checkpoint.pt then points to;
    result.json         the `TrainResult`, written only when the run has ended as "completed" or "diverged" -
                        its presence is what "finished" means;
    error.json          written instead when the run failed (the checkpoint stays for a resume);
    run.lock            held (flock) by the launcher of a multi-process run and its ranks while they run, so a
                        second run or a resume of the folder is refused until they have ended.

Every file is written with `depthwidth.files.atomic_write` (temporary file, fsync, rename).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.files import file_kind, read_json_object

RUN = "run.json"
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_PREV = "checkpoint.prev.pt"
DCP_DIR = "dcp"
RESULT = "result.json"
ERROR = "error.json"
LOCK = "run.lock"


def read_json(path: Path) -> dict[str, Any]:
    """A run folder's JSON object (run.json, result.json); a UserError naming the file when it is not one."""
    return read_json_object(path, what="run folder JSON")


def checkpoint_file(path: Path) -> Path:
    """The checkpoint file of `path`: itself, or checkpoint.pt inside a run folder. FileNotFoundError naming
    the path when there is none; UserError naming what it is when it is no regular file (a named pipe, a
    device). The file is opened later through `files.open_regular`, which checks it again on its descriptor."""
    path = Path(path)
    if path.is_dir():
        inner = path / CHECKPOINT
        kind = file_kind(inner)
        if kind == "missing":
            raise FileNotFoundError(f"checkpoint {path} is a folder without {CHECKPOINT}; give a run folder or a .pt file")
        if kind is not None:
            raise UserError(f"run folder {path}: its {CHECKPOINT} is {kind}, not a regular file; expected a "
                            f"{CHECKPOINT} written by depthwidth train")
        return inner
    kind = file_kind(path)
    if kind in ("missing", "a broken symbolic link"):
        raise FileNotFoundError(f"checkpoint {path} does not exist" + (f" ({kind})" if kind != "missing" else ""))
    if kind is not None:
        raise UserError(f"checkpoint {path} is {kind}, not a regular file; give a run folder or a .pt file")
    return path


def run_folder(path: Path) -> Path:
    """The run folder of `path` (a run folder, or a checkpoint file inside one)."""
    path = Path(path)
    return path if path.is_dir() else path.parent


def is_finished(path: Path) -> bool:
    """Whether the run of `path` has ended with a result (result.json is there)."""
    return (run_folder(path) / RESULT).is_file()


__all__ = ["CHECKPOINT", "CHECKPOINT_PREV", "DCP_DIR", "ERROR", "LOCK", "RESULT", "RUN", "checkpoint_file",
           "is_finished", "read_json", "run_folder"]
