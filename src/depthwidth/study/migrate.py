"""Upgrade a study store written by an earlier version, in place and without losing anything.

Schema 1 -> 2: training runs were stored in run format 1 (see `depthwidth.study.run_config`); format 2
is `TrainConfig`'s own dict, so every training run gets a new config and with it a new run id. The
upgrade, run when `Store.open` meets a schema-1 store:
1. copies the database to `study.sqlite.v1.bak` (SQLite's online backup: complete even in WAL mode);
2. in one transaction, rewrites each training run's config and id in `runs`, and the id in `curves`,
   `results` and `attempts` (foreign keys checked at commit), then sets schema_version = 2;
3. renames each run's checkpoint folder `runs/<old id[:16]>` to `runs/<new id[:16]>`, so an unfinished
   run resumes from its checkpoint (the trainer's own config hash is unchanged by the conversion).
A crash before the commit leaves the schema-1 store as it was (the next open upgrades it again); a
crash between the commit and a rename leaves that run to start again from step 0, with the same numbers.
Finished runs keep their results: a resumed study re-expands its spec to the same new ids and skips them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.study.jobs import run_dir
from depthwidth.study.run_config import config_hash, upgrade_run_config

BACKUP_SUFFIX = ".v{version}.bak"


def upgrade_v1(conn: sqlite3.Connection, path: Path) -> int:
    """Upgrade the schema-1 store at `path` (open as `conn`) to schema 2; returns the runs re-keyed."""
    backup = path.with_name(path.name + BACKUP_SUFFIX.format(version=1))
    try:
        if not backup.exists():
            with sqlite3.connect(backup) as copy:
                conn.backup(copy)
            copy.close()
        renamed = _rekey(conn)
    except (sqlite3.OperationalError, PermissionError) as exc:
        raise UserError(f"{path}: schema version 1 needs an upgrade to version 2, which failed ({exc}); make the "
                        f"folder writable, or copy it somewhere writable, and run `depthwidth study status "
                        f"{path.parent}` to upgrade it") from None
    for old, new in renamed.items():
        src, dst = run_dir(path.parent, old), run_dir(path.parent, new)
        if src.is_dir() and not dst.exists():
            src.rename(dst)
    return len(renamed)


def _rekey(conn: sqlite3.Connection) -> dict[str, str]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("PRAGMA defer_foreign_keys = ON")
        renamed: dict[str, str] = {}
        for run_id, text in conn.execute("SELECT run_id, config FROM runs").fetchall():
            config = upgrade_run_config(json.loads(text))
            new = config_hash(config)
            if new == run_id:
                continue
            conn.execute("UPDATE runs SET run_id = ?, config = ? WHERE run_id = ?",
                         (new, json.dumps(config, sort_keys=True), run_id))
            for table in ("curves", "results", "attempts"):
                conn.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", (new, run_id))
            renamed[run_id] = new
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '2')")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return renamed


__all__ = ["BACKUP_SUFFIX", "upgrade_v1"]
