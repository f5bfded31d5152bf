"""Reading the files a user names (a Hugging Face config, a hardware profile, a run folder's JSON, a
checkpoint, a study spec): every way such a file can be wrong is one `UserError` naming it, and nothing
is read without a bound. `open_regular` is the one checked open; `read_bytes`, `read_head`, `read_text`
and `read_json` read through it, and `pinned_path` hands a reader that needs a path (a memory-mapped
`torch.load`) the very file that was checked. `tests/test_checked_reads.py` finds any other read of a
file in the package, and lists the few that read what the project itself wrote.

- missing: `FileNotFoundError`; a folder, a device or a pipe (`/dev/null`, `/dev/zero`, a FIFO): "not
  a regular file", naming what it is (`file_kind`; a device can be endless, a FIFO never ends). The file
  is opened without blocking and checked on the open descriptor, so a FIFO put in its place after the
  check cannot hang the reader;
- larger than the caller's `max_bytes`: refused before it is read;
- not UTF-8, not valid JSON, a number beyond Python's 4300-digit conversion limit, or nesting deep
  enough to exhaust the parser's recursion: one line naming the file (and the line and column).

Writing is atomic everywhere (`atomic_write`, `write_text`, `write_json`): the bytes go to a temporary
file in the same folder, are flushed to the disk (fsync), and the file is renamed over the target, so a
reader (or a resume after a crash) sees the old file or the new one, never half of one; an `OSError` of
writing the temporary file (a full disk) names the target, not the temporary file. Every writer of
the package (run folders, checkpoints, safetensors, profiles, study records, reports) uses them.
A folder of several files (an exported model, a report) is written through `staged_folder`: into a
temporary folder inside the target, so on the target's own filesystem (a mount point included), moved
in at the end; a failure (a full disk, a read-only target) removes everything it wrote and is one
`UserError` naming the target and the system's reason.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from depthwidth.errors import UserError

#: default size limit of a configuration-like file (configs, profiles, run folders' JSON, specs)
MAX_CONFIG_BYTES = 16 * 1024**2


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def kind_of_mode(mode: int) -> str | None:
    """What a `st_mode` is when it is not a regular file ("a folder", "a character device", ...); None
    for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def file_kind(path: str | os.PathLike) -> str | None:
    """What `path` is when it is not a regular file (links followed): "missing", "a broken symbolic
    link", "a folder", "a character device", "a FIFO (named pipe)", ...; None for a regular file."""
    try:
        return kind_of_mode(os.stat(path).st_mode)
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "missing"
    except NotADirectoryError:
        return "missing"


def open_regular(path: str | os.PathLike, *, what: str, max_bytes: int | None = MAX_CONFIG_BYTES) -> BinaryIO:
    """The regular file `path` opened for reading (binary), checked on its open descriptor: the one way
    the package opens a file a user names (`what` names it in errors, e.g. "checkpoint").

    The open is non-blocking (a FIFO opens at once and is then refused: it can never block the reader),
    the kind is read with `fstat` on that descriptor (so a pipe or device swapped in after any earlier
    check is refused too), and a file larger than `max_bytes` (None: no bound) is refused before any of
    it is read. FileNotFoundError naming the file when it is missing (or a broken link)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if os.path.islink(p):
            raise FileNotFoundError(f"{p}: a broken symbolic link; expected a {what} file") from None
        raise FileNotFoundError(f"{p}: no such {what} file") from None
    except NotADirectoryError:  # a file where the path needs a folder
        raise FileNotFoundError(f"{p}: no such {what} file") from None
    except OSError as exc:
        kind = file_kind(p) if exc.errno == errno.ENXIO else None  # a socket (or a device without a driver)
        if kind is None:
            raise
        raise UserError(f"{p}: {kind}, not a regular file; expected a {what} file") from None
    try:
        info = os.fstat(fd)
        kind = kind_of_mode(info.st_mode)
        if kind is not None:
            raise UserError(f"{p}: {kind}, not a regular file; expected a {what} file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UserError(f"{p}: too large for a {what} file ({info.st_size:,} bytes, more than {max_bytes:,})")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads behave as on any file object
        return open(p, "rb", opener=lambda *_: fd)  # the checked descriptor, under the file's own name
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of the regular file `path` (`open_regular`), at most `max_bytes` of them: a file that
    grew past the bound after it was checked is refused too."""
    with open_regular(path, what=what, max_bytes=max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UserError(f"{path}: too large for a {what} file (more than {max_bytes:,} bytes)")
    return data


def read_head(path: str | os.PathLike, size: int, *, what: str, max_bytes: int | None = MAX_CONFIG_BYTES) -> bytes:
    """The first `size` bytes of the regular file `path` (`open_regular`; fewer when it is shorter)."""
    with open_regular(path, what=what, max_bytes=max_bytes) as fh:
        return fh.read(size)


def pinned_path(fh: BinaryIO) -> str:
    """A path that opens the very file the checked `fh` has open, for a reader that needs a path (a
    memory-mapped `torch.load`): its descriptor's entry in /proc/self/fd on Linux, so a file put in the
    place of the checked one is never read; the file's own name where no such entry exists."""
    entry = f"/proc/self/fd/{fh.fileno()}"
    return entry if os.path.exists(entry) else str(fh.name)


def read_text(path: str | os.PathLike, *, what: str, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The UTF-8 text of the regular file `path` (`read_bytes`; `what` names it in errors, e.g. "config")."""
    data = read_bytes(path, what=what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a {what} file") from None


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


__all__ = ["MAX_CONFIG_BYTES", "STAGING_PREFIX", "atomic_write", "file_kind", "is_staging", "kind_of_mode", "loads",
           "missing_folders", "open_regular", "pinned_path", "read_bytes", "read_head", "read_json", "read_json_object",
           "read_text", "staged_folder", "write_json", "write_text"]


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
    except OSError as exc:
        if exc.errno is None or exc.filename not in (None, str(tmp), tmp) or exc.filename2 is not None:
            raise
        # a full disk while writing the temporary file (Python names no file then): the error names the target
        raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path)) from exc
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


#: the name start of `staged_folder`'s temporary folder (followed by the writer's process id)
STAGING_PREFIX = ".depthwidth-partial-"


def is_staging(path: Path) -> bool:
    """`path` is the temporary folder of a `staged_folder` (a leftover when its writer was killed)."""
    return path.name.startswith(STAGING_PREFIX)


def _writer_alive(path: Path) -> bool:
    pid = path.name[len(STAGING_PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, deepest first."""
    out = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def _move_into(tmp: Path, out: Path) -> None:
    for item in sorted(tmp.iterdir()):
        dest = out / item.name
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif item.is_dir() and (dest.exists() or dest.is_symlink()):
            dest.unlink()
        os.replace(item, dest)


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike, *, what: str) -> Iterator[Path]:
    """A temporary folder inside `out` (created when missing) to write `what` ("the model", "the report")
    into. When the block ends, its entries replace those of the same names in `out` (renames on one
    filesystem: no copy, nothing half-written under a final name); when it fails, the temporary folder
    and any folder created for it are removed, so nothing of the attempt is left, and an `OSError` of
    the writing (a full disk, a read-only or unwritable target) becomes one `UserError` naming `out`
    and the system's reason. Temporary folders of writers that were killed are removed first."""
    out = Path(out)
    created = missing_folders(out)
    tmp: Path | None = None
    done = False
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in [p for p in out.iterdir() if is_staging(p) and p.is_dir() and not _writer_alive(p)]:
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=out))
        yield tmp
        _move_into(tmp, out)
        done = True
    except OSError as exc:
        reason = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc) or type(exc).__name__)
        raise UserError(f"{out}: cannot write {what} ({reason}); nothing of it was left there") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if not done:
            for folder in created:  # deepest first; rmdir removes only the ones still empty
                with contextlib.suppress(OSError):
                    folder.rmdir()
