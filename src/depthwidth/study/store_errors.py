"""Which errors of SQLite mean that a study store is damaged, and which only that it cannot be used where
it is. The store (`depthwidth.study.store`) turns each into one line naming the file:

- `damaged`: the file is not a store, or SQLite finds it corrupt (SQLITE_CORRUPT, SQLITE_NOTADB), or its
  rows cannot be what the store wrote; the message names `depthwidth study repair`.
- `StoreAccessError`: a full disk, an I/O error, a read-only, locked or unopenable file (`ACCESS_CODES`).
  Nothing says the store is damaged - a write that failed was rolled back, so what it held is unchanged -
  and the message says so and names the cause: a full disk as the system names it ("No space left on
  device"), whether SQLite reports SQLITE_FULL or an I/O error on a disk with almost no space left. `study
  repair` leaves such a store alone.

Codes are read from `sqlite_errorcode` (Python 3.11 and later), else from SQLite's message.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.study.records import REPAIR_HINT


class StoreAccessError(UserError):
    """The store cannot be used where it is - a full disk, an I/O error, a read-only, locked or unopenable
    file - though nothing says it is damaged: one line naming the file and the cause. `study repair`
    leaves such a store alone."""


#: SQLite's primary result codes (the low byte of an extended code), https://sqlite.org/rescode.html
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_READONLY = 3, 5, 6, 7, 8
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 10, 11, 13, 14, 26
#: the codes of a store that cannot be used where it is, not of one that is damaged
ACCESS_CODES = (SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL,
                SQLITE_CANTOPEN)
#: each code's message in SQLite, for a Python without `sqlite_errorcode` (before 3.11)
_MESSAGES = {"access permission denied": SQLITE_PERM, "database is locked": SQLITE_BUSY,
             "database table is locked": SQLITE_LOCKED, "out of memory": SQLITE_NOMEM,
             "readonly database": SQLITE_READONLY, "disk I/O error": SQLITE_IOERR,
             "malformed": SQLITE_CORRUPT, "database or disk is full": SQLITE_FULL,
             "unable to open database": SQLITE_CANTOPEN, "not a database": SQLITE_NOTADB}
#: free bytes below which a disk I/O error of SQLite is taken for a full disk (its WAL index grows by 32 KiB)
LOW_SPACE_BYTES = 1024**2


def sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of `exc`, None when it has none."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    return next((c for text, c in _MESSAGES.items() if text in str(exc)), None)


def _free_bytes(folder: Path) -> int | None:
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs on this system
        return None
    return stats.f_bavail * stats.f_frsize


def access_error(path: Path, exc: BaseException, *, doing: str) -> StoreAccessError | None:
    """The one-line error for a SQLite error that is about where the store lives (`ACCESS_CODES`), naming
    the file, the cause (a full disk as the system names it) and that nothing stored is lost; None for
    any other error. `doing`: open, read, write or create."""
    code = sqlite_code(exc)
    if not isinstance(exc, sqlite3.Error) or code not in ACCESS_CODES:
        return None
    free = _free_bytes(path.parent)
    full = code == SQLITE_FULL or (code == SQLITE_IOERR and free is not None and free < LOW_SPACE_BYTES)
    cause = os.strerror(errno.ENOSPC) if full else f"SQLite: {exc}"
    kept = "nothing was written" if doing == "create" else "nothing stored in it is lost"
    then = "free some space, then run the same command again" if full else \
        f"run the same command again once it can be {_DONE.get(doing, 'written')}"
    return StoreAccessError(f"{path}: cannot {doing} the study store ({cause}); {kept}: {then}")


_DONE = {"open": "opened", "read": "read"}


def damaged(path: Path, why: str) -> UserError:
    """The error for a study store that cannot be read as one."""
    return UserError(f"{path}: not a readable study store: {why}; {REPAIR_HINT.replace('DIR', str(path.parent))}")


def unreadable(path: Path, exc: BaseException, *, doing: str) -> UserError:
    """A SQLite error of reading the store: a `StoreAccessError` when it is about where the store lives,
    else the store is `damaged`."""
    return access_error(path, exc, doing=doing) or damaged(path, f"SQLite cannot read it ({type(exc).__name__}: {exc})")


__all__ = ["ACCESS_CODES", "LOW_SPACE_BYTES", "SQLITE_CORRUPT", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_NOTADB",
           "StoreAccessError", "access_error", "damaged", "sqlite_code", "unreadable"]
