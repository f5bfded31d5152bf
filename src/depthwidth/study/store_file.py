"""The study store's SQLite file: its schema, a new store built whole or not at all, and a connection with
the store's settings (WAL, synchronous writes, foreign keys). `depthwidth.study.store.Store` reads and
writes through these; `depthwidth.study.store_errors` says which SQLite errors mean damage."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from depthwidth.study.records import CURVE_KEYS, STATUSES
from depthwidth.study.store_errors import access_error, damaged

TABLES = ("meta", "runs", "curves", "results", "attempts")
#: An optional table, made by the first write that needs it (`Store.record_inspection`), so a study that
#: never inspects is never changed and needs no schema version: a store without it holds no inspection.
#: One row per (training run, settings as canonical JSON); a later inspection with the same settings
#: replaces it.
INSPECTIONS_TABLE = "inspections"
INSPECTIONS_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {INSPECTIONS_TABLE} (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    settings TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed')),
    error TEXT,
    result TEXT,
    wall_seconds REAL,
    finished_at REAL NOT NULL,
    PRIMARY KEY (run_id, settings)
)
"""

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('train', 'bench')),
    grp TEXT NOT NULL,
    shape_label TEXT NOT NULL,
    lr REAL,
    seed INTEGER,
    lr_trials INTEGER,
    config TEXT NOT NULL,
    in_spec INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    wall_seconds REAL,
    train_seconds REAL,
    eval_seconds REAL,
    worker TEXT
);
CREATE TABLE IF NOT EXISTS curves (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    idx INTEGER NOT NULL,
    {", ".join(f"{k} {'INTEGER' if k in ('step', 'tokens') else 'REAL'}" for k in CURVE_KEYS)},
    extra TEXT,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
    val_loss REAL, tokens_per_s REAL, mfu REAL, peak_memory_bytes INTEGER, params INTEGER, tokens INTEGER,
    batch_stream_hash TEXT, corpus_hash TEXT,
    result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    attempt INTEGER NOT NULL,
    at REAL NOT NULL,
    message TEXT NOT NULL
);
"""


def build_store(path: Path, meta: dict[str, str]) -> None:
    """A new store at `path`: its tables and `meta`, in one transaction into a temporary file beside it
    that is renamed into place once complete, so a full disk (or a kill) leaves no half-made store."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.replace(tmp, path)
    except sqlite3.Error as exc:
        problem = access_error(path, exc, doing="create")
        if problem is None:
            raise
        raise problem from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            leftover.unlink(missing_ok=True)


def connect(path: Path) -> sqlite3.Connection:
    conn = None
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # SQLite's message may carry the file's bytes
        if conn is not None:
            conn.close()
        raise access_error(path, exc, doing="open") or damaged(
            path, f"it is not a readable SQLite database ({type(exc).__name__}: {exc})") from None
    return conn


__all__ = ["INSPECTIONS_SCHEMA", "INSPECTIONS_TABLE", "TABLES", "build_store", "connect"]
