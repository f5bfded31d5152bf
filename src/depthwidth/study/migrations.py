"""Every change of stored data, by number: the one place to read how an older study is brought up to date.

Three mechanisms keep stored studies readable; use exactly one for each change:

1. **Store migrations** (`MIGRATIONS`, here): a change of the stored layout (a table, a column, the form of
   a stored config, a run id). Each is a numbered `Migration`; the store's `schema_version` (in `meta`)
   is the number of the last one applied, and `SCHEMA_VERSION` is the highest number here. `migrate`,
   called by `Store.open`, applies in order every migration above the store's version.
2. **Run-format steps** (`TRAIN_FORMAT_STEPS`, in `depthwidth.study.run_config`, listed below): a stored
   training run's config of an older format is converted when read, step by numbered step, so functions
   that read a run config accept every format. A store migration may use them to rewrite stored configs
   for good (migration 2 does). They live next to the run format because every reader of a run config
   needs them; `run_config` does not import this module.
3. **`OMITTED_AT_DEFAULT`** (in `depthwidth.artifact.config`): a field added to `TrainConfig` is left out
   of a run's identity while at its default, so every stored run id and trainer config hash stays valid
   and nothing needs rewriting. A new `TrainConfig` field: add it there, no migration. A change of what is
   stored or how: a numbered migration here (and a run-format step when a run config's form changes).

An optional table that only ever adds rows (`inspections`, `depthwidth.study.store_file.INSPECTIONS_TABLE`)
is made by the first write that needs it, like the `migrations` table below: a store without it reads as
having none, so it needs no version. A migration that re-keys run ids must re-key its rows too.

Store migrations (version: what it does):
    2  train runs in run format 2: each training run's config becomes format 2 (run-format step 2), so its
       run id changes; `runs`, `curves`, `results` and `attempts` follow the new id and each run's
       checkpoint folder `runs/<old id[:16]>` is renamed to `runs/<new id[:16]>`, so an unfinished run
       resumes (the trainer's own config hash is unchanged by the conversion).
Run-format steps of a training run (format: what it does):
    2  TrainConfig's own dict: format 1 (`data`, `train` with `min_lr_ratio`, `lr` and `seed` apart)
       becomes `TrainConfig.to_dict()` less its execution fields, `min_lr = lr * min_lr_ratio`.

How a migration is applied, each on its own:
1. the database is copied to `study.sqlite.v<from>.bak` (SQLite's online backup: complete even in WAL
   mode), unless that backup already exists from an earlier try;
2. in one transaction (foreign keys checked at its commit), the migration's function runs, then
   `schema_version` is set to its number and it is recorded in the `migrations` table (version, name,
   time applied; the table is made by the first migration a store receives, so a store that never needed
   one is never written to on open);
3. after the commit, whatever the function returned to do outside the database runs (migration 2 renames
   run folders).
A crash before a commit leaves the store at its previous version, as it was (the next open tries again);
a crash between the commit of migration 2 and a rename leaves that run to start again from step 0, with
the same numbers. A store that cannot be written (a read-only folder) is refused with one line naming the
file and the fix; a store of a version newer than this code, or of one it does not know, is refused too.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.study.jobs import run_dir
from depthwidth.study.run_config import TRAIN_FORMAT_STEPS, config_hash, upgrade_run_config

BACKUP_SUFFIX = ".v{version}.bak"
#: The table that records the migrations a store received (made by the first one).
MIGRATIONS_TABLE = "migrations"

#: What a migration leaves to do once its transaction is committed (renaming folders), or None.
AfterCommit = Callable[[], None] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Migration:
    """One numbered change of the store: `apply(conn, path)` runs inside the transaction that then sets
    `schema_version = version`; it may return a function to run after the commit (outside the database)."""

    version: int
    name: str
    apply: Callable[[sqlite3.Connection, Path], AfterCommit]


def _train_runs_in_run_format_2(conn: sqlite3.Connection, path: Path) -> AfterCommit:
    """Rewrite each training run's config to the current run format and re-key it under its new id."""
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

    def move_run_folders() -> None:
        for old, new in renamed.items():
            src, dst = run_dir(path.parent, old), run_dir(path.parent, new)
            if src.is_dir() and not dst.exists():
                src.rename(dst)

    return move_run_folders


#: Every store migration, in order; version n brings a store from schema n - 1 to n.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(version=2, name="train runs in run format 2", apply=_train_runs_in_run_format_2),
)
#: The store's schema version this code writes: the highest migration's.
SCHEMA_VERSION = MIGRATIONS[-1].version


def migrate(conn: sqlite3.Connection, path: Path) -> list[Migration]:
    """Bring the store at `path` (open as `conn`, in autocommit mode) to the latest schema version by
    applying, in order, each migration above its `schema_version`; returns those applied (none for a
    store that is up to date). UserError (one line naming `path`) for a version this code cannot read
    or a migration that could not write."""
    registry = _checked(MIGRATIONS)
    latest = registry[-1].version
    readable = {str(m.version - 1): i for i, m in enumerate(registry)} | {str(latest): len(registry)}
    version = _version(conn)
    if version not in readable:
        raise UserError(f"{path}: schema version {version}, this depthwidth reads version {latest}")
    applied = []
    for migration in registry[readable[version]:]:
        if _apply(conn, path, migration=migration):
            applied.append(migration)
    return applied


def applied_migrations(conn: sqlite3.Connection) -> list[tuple[int, str, float]]:
    """(version, name, time applied) of each migration the store received, in order; [] when none."""
    try:
        rows = conn.execute(f"SELECT version, name, applied_at FROM {MIGRATIONS_TABLE} ORDER BY version")
        return [tuple(row) for row in rows]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def _apply(conn: sqlite3.Connection, path: Path, *, migration: Migration) -> bool:
    """Back up, then apply `migration` in one transaction; False when another process applied it first."""
    before = migration.version - 1
    backup = path.with_name(path.name + BACKUP_SUFFIX.format(version=before))
    try:
        if not backup.exists():
            with sqlite3.connect(backup) as copy:
                conn.backup(copy)
            copy.close()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if _version(conn) != str(before):  # upgraded meanwhile by another process
                conn.execute("ROLLBACK")
                return False
            conn.execute("PRAGMA defer_foreign_keys = ON")
            after = migration.apply(conn, path)
            conn.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, "
                         "name TEXT NOT NULL, applied_at REAL NOT NULL)")
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE}(version, name, applied_at) VALUES (?, ?, ?)",
                         (migration.version, migration.name, time.time()))
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                         (str(migration.version),))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except (sqlite3.OperationalError, PermissionError) as exc:
        raise UserError(f"{path}: schema version {before} needs an upgrade to version {migration.version}, which "
                        f"failed ({exc}); make the folder writable, or copy it somewhere writable, and run "
                        f"`depthwidth study status {path.parent}` to upgrade it") from None
    if after is not None:
        after()
    return True


def _version(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else row[0]


def _checked(registry: Sequence[Migration]) -> Sequence[Migration]:
    """The registry, after checking it is numbered 2, 3, ... with no gap (a defect otherwise)."""
    versions = [m.version for m in registry]
    if not versions or versions != list(range(2, 2 + len(versions))):
        raise RuntimeError(f"store migrations must be numbered 2, 3, ... in order, not {versions}")
    return registry


__all__ = ["BACKUP_SUFFIX", "MIGRATIONS", "MIGRATIONS_TABLE", "SCHEMA_VERSION", "TRAIN_FORMAT_STEPS", "Migration",
           "applied_migrations", "migrate"]
