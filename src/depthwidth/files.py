"""Reading the files a user names (a Hugging Face config, a hardware profile, a run folder's JSON, a
study spec): every way such a file can be wrong is one `UserError` naming it, and nothing is read
without a bound.

- missing: `FileNotFoundError`; a folder, a device or a pipe (`/dev/null`, `/dev/zero`): "not a
  regular file" (a device can be endless);
- larger than the caller's `max_bytes`: refused before it is read;
- not UTF-8, not valid JSON, a number beyond Python's 4300-digit conversion limit, or nesting deep
  enough to exhaust the parser's recursion: one line naming the file (and the line and column).

Writing is atomic everywhere (`atomic_write`, `write_text`, `write_json`): the bytes go to a temporary
file in the same folder, are flushed to the disk (fsync), and the file is renamed over the target, so a
reader (or a resume after a crash) sees the old file or the new one, never half of one. Every writer of
the package (run folders, checkpoints, safetensors, profiles, study records, reports) uses them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from depthwidth.errors import UserError

#: default size limit of a configuration-like file (configs, profiles, run folders' JSON, specs)
MAX_CONFIG_BYTES = 16 * 1024**2


def read_text(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the regular file `path` (`what` names it in errors, e.g. "config")."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such {what} file")
    if not p.is_file():
        raise UserError(f"{p}: not a regular file; expected a {what} file")
    with open(p, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UserError(f"{p}: too large for a {what} file (more than {max_bytes:,} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a {what} file") from None


def loads(text: str, *, source: str) -> Any:
    """`json.loads(text)`, every failure a UserError naming `source` (a file, or a stored row)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, or arrays nested 100000 deep
        raise UserError(f"{source}: unreadable JSON ({type(exc).__name__}: {str(exc).split(';')[0]})") from None


def read_json(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """The parsed JSON of the file `path` (see `read_text` and `loads`)."""
    return loads(read_text(path, what=what, max_bytes=max_bytes), source=str(path))


def read_json_object(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> dict[str, Any]:
    """`read_json`, refusing anything but a JSON object at the top level."""
    data = read_json(path, what=what, max_bytes=max_bytes)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


__all__ = ["MAX_CONFIG_BYTES", "loads", "read_json", "read_json_object", "read_text"]


def atomic_write(path: str | os.PathLike, write: Callable[[Path], Any], *, previous: Path | None = None) -> Path:
    """Call `write(tmp)` for a temporary path beside `path`, fsync it, then rename it over `path` (same
    folder, so atomic). With `previous`, the file at `path` is first renamed to `previous`, so two versions
    are kept. The temporary file is removed whatever happens."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        if previous is not None and path.exists():
            os.replace(path, previous)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str | os.PathLike, obj: Any, *, indent: int = 1) -> Path:
    """Write `obj` as JSON (NaN refused) to `path` atomically."""
    return write_text(path, json.dumps(obj, indent=indent, allow_nan=False))
