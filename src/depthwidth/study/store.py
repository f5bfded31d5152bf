"""The study store: one SQLite database (WAL journal) in the study folder, `study.sqlite`.

Tables (schema version `SCHEMA_VERSION`, kept in `meta`; a store of an earlier version is upgraded
in place when opened, with a backup, see `depthwidth.study.migrations`):
    meta     key/value: schema_version, name, created_at, spec (JSON), spec_text, spec_source
    runs     one row per run: run_id (sha256 of its canonical config), kind ('train' | 'bench'), group,
             shape label, lr, seed, lr_trials, config (JSON; hashing it gives run_id again), in_spec
             (1 when the current spec still asks for it), status, attempts, error, timings, worker
    curves   the training curve of a finished train run: step, tokens, train/val loss, lr, grad norm,
             tokens/s (one row per recorded point; `extra` holds any other keys as JSON)
    results  a finished run's result: headline numbers as columns plus the whole result as JSON
    attempts every attempt that ended in an error: run_id, attempt, time, message
    inspections  (optional, made by its first write) the per-layer diagnostics of a finished training run
             ([inspect], `depthwidth.study.inspections`): run_id, settings, status, error, result (JSON)

Status: pending -> running -> completed | diverged | failed. A run's finished status, its curve and its
result are written in one transaction, so a crash leaves a run either finished with everything or not
finished at all; `running` rows of a study nobody is running (see `runner.StudyLock`) read as interrupted.

Errors (`depthwidth.study.store_errors`): a store that is not one, or that SQLite finds corrupt, is
"not a readable study store" with the repair named; a store that cannot be used where it is - a full disk,
an I/O error, a read-only or locked file - is a `StoreAccessError`, one line naming the file and the cause,
never called damaged: the write that failed was rolled back, so a study whose disk fills resumes from what
was stored once there is space. A new store is built in a temporary file and renamed into place, so it
exists whole (tables and spec) or not at all.

Read API (what reports use): `Store.open(dir)`, `.spec()`, `.runs()`, `.run(id)`, `.curves(id)`,
`.results()`, `.result(id)`, `.attempt_errors(id)`, `.inspections()`; records are frozen dataclasses with
`to_dict()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


from depthwidth.errors import UserError
from depthwidth.study.migrations import SCHEMA_VERSION, migrate
from depthwidth.study.records import (
    CURVE_KEYS,
    FINISHED,
    RESULT_KEYS,
    STATUSES,
    CurvePoint,
    InspectionRecord,
    ResultRecord,
    RunRecord,
    curve_point,
    inspection_record,
    result_record,
    run_record,
)
from depthwidth.study.store_file import INSPECTIONS_SCHEMA, INSPECTIONS_TABLE, TABLES, build_store, connect
from depthwidth.study.store_errors import (
    SQLITE_CORRUPT,
    SQLITE_NOTADB,
    StoreAccessError,
    access_error,
    damaged,
    sqlite_code,
    unreadable,
)

STORE_FILE = "study.sqlite"
class Store:
    """A study's SQLite store. Use `Store.open(dir)` to read, `Store.create(dir, ...)` to start one."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.dir = path.parent
        self._conn = conn

    # ---- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(cls, study_dir: str | os.PathLike) -> Store:
        """Open an existing study, upgrading a store of an earlier schema version in place
        (`depthwidth.study.migrations`). FileNotFoundError when the folder holds none; UserError (a
        ValueError) when its schema version is newer than this code or it cannot be upgraded."""
        path = Path(study_dir) / STORE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{study_dir} holds no study ({STORE_FILE} not found)")
        if path.stat().st_size == 0:
            raise damaged(path, "it is empty (0 bytes)")
        store = cls(path, connect(path))
        try:
            store._check_intact()
        except BaseException:
            store.close()
            raise
        try:
            if store._meta("schema_version") is None:
                raise damaged(path, "it records no schema version (not a depthwidth study, or a damaged one)")
            migrate(store._conn, path)  # an earlier version's store is upgraded in place, with a backup
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def create(cls, study_dir: str | os.PathLike, *, name: str, spec: dict, spec_text: str, source: str) -> Store:
        """Open the study in `study_dir`, creating it (and the folder) if needed, and record the spec.
        A folder that already holds a different study (another name) is refused. A new store is written
        whole into a temporary file and renamed into place (`_build`), so it exists complete or not at all."""
        folder = Path(study_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / STORE_FILE
        values = {"spec": json.dumps(spec, sort_keys=True), "spec_text": spec_text, "spec_source": source,
                  "updated_at": repr(time.time())}
        if not path.is_file():
            build_store(path, values | {"schema_version": str(SCHEMA_VERSION), "name": name,
                                   "created_at": repr(time.time())})
            return cls.open(folder)
        store = cls.open(folder)
        if store._meta("name") != name:
            other = store._meta("name")
            store.close()
            raise UserError(f"{folder} holds the study {other!r}, not {name!r}; choose another --dir")
        try:
            with store._tx() as c:
                c.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items())
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- reading ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._meta("name") or ""

    def spec(self):
        """The typed `StudySpec` most recently run in this folder, parsed again from its stored TOML text
        (so it is checked by the same rules as a spec file; an error names the folder)."""
        from depthwidth.study.spec import parse_spec

        return parse_spec(self.spec_text(), source=f"{self.dir / STORE_FILE} (stored spec of {self._meta('spec_source')})")

    def spec_text(self) -> str:
        return self._meta("spec_text") or ""

    def runs(self, *, kind: str | None = None, status: str | None = None, in_spec: bool | None = True,
             group: str | None = None) -> list[RunRecord]:
        """Runs in creation order; by default only those the current spec asks for."""
        where, args = [], []
        for column, value in (("kind", kind), ("status", status), ("grp", group)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if in_spec is not None:
            where.append("in_spec = ?")
            args.append(int(in_spec))
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
        return [run_record(row) for row in self._read(sql, args)]

    def run(self, run_id: str) -> RunRecord:
        """One run by id or unique id prefix (ValueError when unknown or ambiguous)."""
        rows = self._read("SELECT * FROM runs WHERE run_id LIKE ? ORDER BY rowid", (run_id.replace("%", "") + "%",))
        if len(rows) != 1:
            raise UserError(f"run {run_id!r} " + ("is not in this study" if not rows else
                                                   f"is ambiguous ({len(rows)} runs start with it)"))
        return run_record(rows[0])

    def curves(self, run_id: str) -> list[CurvePoint]:
        return [curve_point(row) for row in self._read("SELECT * FROM curves WHERE run_id = ? ORDER BY idx", (run_id,))]

    def results(self, *, kind: str | None = None, in_spec: bool | None = True) -> list[ResultRecord]:
        """Results of finished runs (completed or diverged), in run creation order."""
        sql = ("SELECT results.*, runs.kind AS kind FROM results JOIN runs USING (run_id) WHERE 1=1"
               + (" AND runs.kind = ?" if kind else "") + (" AND runs.in_spec = ?" if in_spec is not None else "")
               + " ORDER BY runs.rowid")
        args = [a for a in (kind, None if in_spec is None else int(in_spec)) if a is not None]
        return [result_record(row) for row in self._read(sql, args)]

    def result(self, run_id: str) -> ResultRecord | None:
        rows = self._read("SELECT results.*, runs.kind AS kind FROM results JOIN runs USING (run_id) "
                          "WHERE run_id = ?", (run_id,))
        return result_record(rows[0]) if rows else None

    def attempt_errors(self, run_id: str) -> list[tuple[int, float, str]]:
        rows = self._read("SELECT attempt, at, message FROM attempts WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [tuple(r) for r in rows]

    def inspections(self) -> list[InspectionRecord]:
        """Every stored inspection, oldest first ([] for a store that has none, or no table for them)."""
        rows = self._read(f"SELECT * FROM {INSPECTIONS_TABLE} ORDER BY finished_at, rowid", missing_ok=True)
        return [inspection_record(row) for row in rows]

    def counts(self) -> dict[str, int]:
        """Runs of the current spec by status (every status present, zero when none)."""
        out = dict.fromkeys(STATUSES, 0)
        for status, n in self._read("SELECT status, COUNT(*) FROM runs WHERE in_spec = 1 GROUP BY status"):
            out[status] = n
        return out

    # ---- writing (the driver only) ---------------------------------------------------------------
    def sync_runs(self, runs: Iterable[dict]) -> int:
        """Make the stored run list match the spec: insert new runs as pending, keep every stored one
        (finished work is never deleted), flag which the current spec asks for. Each dict has run_id,
        kind, group, shape_label, lr, seed, lr_trials, config. Returns the number of new runs."""
        runs = list(runs)
        now = time.time()
        with self._tx() as c:
            before = c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            c.execute("UPDATE runs SET in_spec = 0")
            for r in runs:
                c.execute(
                    "INSERT OR IGNORE INTO runs(run_id, kind, grp, shape_label, lr, seed, lr_trials, config, "
                    "status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                    (r["run_id"], r["kind"], r["group"], r["shape_label"], r["lr"], r["seed"], r["lr_trials"],
                     json.dumps(r["config"], sort_keys=True), now),
                )
                c.execute("UPDATE runs SET in_spec = 1, grp = ?, lr_trials = ? WHERE run_id = ?",
                          (r["group"], r["lr_trials"], r["run_id"]))
            after = c.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        return after - before

    def mark_running(self, run_id: str, *, worker: str | None = None) -> None:
        with self._tx() as c:
            c.execute("UPDATE runs SET status = 'running', attempts = attempts + 1, started_at = ?, worker = ?, "
                      f"error = NULL WHERE run_id = ? AND status NOT IN ({', '.join(repr(s) for s in FINISHED)})",
                      (time.time(), worker, run_id))

    def record_finished(self, run_id: str, *, status: str, result: dict, curve: list[dict],
                        wall_seconds: float | None, worker: str | None = None) -> None:
        """Store a finished run: its status, result and curve in one transaction."""
        if status not in FINISHED:
            raise ValueError(f"status={status!r}: a finished run is one of {', '.join(FINISHED)}")
        heads = [result.get(k) for k in RESULT_KEYS]
        with self._tx() as c:
            c.execute("DELETE FROM curves WHERE run_id = ?", (run_id,))
            c.execute("DELETE FROM results WHERE run_id = ?", (run_id,))
            c.executemany(
                f"INSERT INTO curves(run_id, idx, {', '.join(CURVE_KEYS)}, extra) VALUES "
                f"(?, ?, {', '.join('?' for _ in CURVE_KEYS)}, ?)",
                [(run_id, i, *[p.get(k) for k in CURVE_KEYS],
                  json.dumps({k: v for k, v in p.items() if k not in CURVE_KEYS}, sort_keys=True) or None)
                 for i, p in enumerate(curve)],
            )
            c.execute(f"INSERT INTO results(run_id, {', '.join(RESULT_KEYS)}, result) VALUES "
                      f"(?, {', '.join('?' for _ in RESULT_KEYS)}, ?)",
                      (run_id, *heads, json.dumps(result, sort_keys=True, default=_jsonable)))
            c.execute("UPDATE runs SET status = ?, error = NULL, finished_at = ?, wall_seconds = ?, train_seconds = ?, "
                      "eval_seconds = ?, worker = COALESCE(?, worker) WHERE run_id = ?",
                      (status, time.time(), wall_seconds, result.get("train_seconds"), result.get("eval_seconds"),
                       worker, run_id))

    def record_error(self, run_id: str, *, error: str, final: bool) -> None:
        """An attempt failed: log it; the run goes back to pending (to be retried) or, when `final`,
        becomes failed with the error."""
        with self._tx() as c:
            attempt = c.execute("SELECT attempts FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
            c.execute("INSERT INTO attempts(run_id, attempt, at, message) VALUES (?, ?, ?, ?)",
                      (run_id, attempt, time.time(), error))
            c.execute("UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE run_id = ?",
                      ("failed" if final else "pending", error, time.time() if final else None, run_id))

    def record_inspection(self, run_id: str, *, settings: dict, status: str, result: dict | None,
                          error: str | None, wall_seconds: float | None) -> None:
        """Store one inspection of the training run `run_id` (its table made on the first)."""
        if status not in ("completed", "failed"):
            raise ValueError(f"status={status!r}: an inspection is completed or failed")
        with self._tx() as c:
            c.execute(INSPECTIONS_SCHEMA)
            c.execute(f"INSERT OR REPLACE INTO {INSPECTIONS_TABLE}(run_id, settings, status, error, result, "
                      "wall_seconds, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (run_id, json.dumps(settings, sort_keys=True), status, error,
                       None if result is None else json.dumps(result, sort_keys=True, default=_jsonable),
                       wall_seconds, time.time()))

    # ---- internals -------------------------------------------------------------------------------
    def _check_intact(self) -> None:
        """SQLite's quick check of every page, then a read of each table's schema (random bytes written
        into the file are found here, not in the middle of a report); a UserError naming the file and
        the repair when either fails. A table that is not there is left to the version check."""
        problems = [row[0] for row in self._read("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            found = " ".join(" ".join(map(str, problems)).split())
            raise damaged(self.path, f"SQLite finds it damaged ({found[:200]})")
        for table in (*TABLES, INSPECTIONS_TABLE):
            self._read(f"SELECT * FROM {table} LIMIT 0", missing_ok=True)

    def _read(self, sql: str, args: tuple | list = (), *, missing_ok: bool = False) -> list:
        """The rows of one query; a store that cannot be read as one is `damaged`, one that cannot be read
        where it is (a full disk, an I/O error, a lock) a `StoreAccessError`."""
        try:
            return self._conn.execute(sql, args).fetchall()
        except (sqlite3.OperationalError, sqlite3.DataError, UnicodeDecodeError) as exc:
            if missing_ok and "no such table" in str(exc):
                return []
            raise unreadable(self.path, exc, doing="read") from None
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # a ProgrammingError or IntegrityError: a defect here
                raise
            raise unreadable(self.path, exc, doing="read") from None

    def _meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,), missing_ok=True)
        if rows and not isinstance(rows[0][0], str):
            raise damaged(self.path, f"its recorded {key} is {type(rows[0][0]).__name__}, not text")
        return rows[0][0] if rows else None

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT; ROLLBACK on any error). A write that the disk
        or the file refuses is a `StoreAccessError`, and what the store held before is unchanged."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite has already rolled back after a full disk
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            problem = access_error(self.path, exc, doing="write")
            if problem is None and sqlite_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB):
                problem = damaged(self.path, f"SQLite cannot write it ({type(exc).__name__}: {exc})")
            if problem is None:
                raise
            raise problem from None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a result")


__all__ = ["CURVE_KEYS", "FINISHED", "STATUSES", "SCHEMA_VERSION", "STORE_FILE", "CurvePoint", "ResultRecord",
           "RunRecord", "Store", "StoreAccessError"]
