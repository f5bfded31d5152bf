"""The SQLite store: transactional writes, schema version, stored runs never lost."""

from __future__ import annotations

import sqlite3

import pytest

from depthwidth.study import Store
from depthwidth.study.store import SCHEMA_VERSION, STORE_FILE


def row(run_id: str, lr: float = 1e-3) -> dict:
    return {"run_id": run_id, "kind": "train", "group": "g", "shape_label": "L1-H8-A1", "lr": lr, "seed": 0,
            "lr_trials": 2, "config": {"lr": lr}}


def make(tmp_path, name="s") -> Store:
    return Store.create(tmp_path, name=name, spec={"name": name}, spec_text="name = 's'", source="s.toml")


def test_finished_run_is_written_in_one_transaction(tmp_path):
    with make(tmp_path) as store:
        store.sync_runs([row("a")])
        store.mark_running("a")
        bad_point = {"step": 1, "train_loss": 2.0, "odd": object()}  # cannot be stored: the write fails late
        with pytest.raises(TypeError):
            store.record_finished("a", status="completed", result={"val_loss": 1.5}, curve=[{"step": 0}, bad_point],
                                  wall_seconds=1.0)
        run = store.run("a")
        assert run.status == "running" and not run.finished
        assert store.curves("a") == [] and store.result("a") is None
        store.record_finished("a", status="completed", result={"val_loss": 1.5, "tokens": 64},
                              curve=[{"step": 1, "train_loss": 2.0, "seconds": 0.1}], wall_seconds=1.0)
        assert store.run("a").status == "completed" and store.result("a").val_loss == 1.5
        (point,) = store.curves("a")
        assert (point.step, point.train_loss, point.extra) == (1, 2.0, {"seconds": 0.1})


def test_errors_retry_then_fail(tmp_path):
    with make(tmp_path) as store:
        store.sync_runs([row("a")])
        store.mark_running("a")
        store.record_error("a", error="boom 1", final=False)
        assert store.run("a").status == "pending"
        store.mark_running("a")
        store.record_error("a", error="boom 2", final=True)
        run = store.run("a")
        assert (run.status, run.attempts, run.error) == ("failed", 2, "boom 2")
        assert [(a, m) for a, _, m in store.attempt_errors("a")] == [(1, "boom 1"), (2, "boom 2")]


def test_sync_keeps_runs_the_spec_dropped(tmp_path):
    with make(tmp_path) as store:
        assert store.sync_runs([row("a"), row("b", 3e-3)]) == 2
        assert store.sync_runs([row("b", 3e-3), row("c", 1e-2)]) == 1
        assert [r.run_id for r in store.runs()] == ["b", "c"]
        assert [r.run_id for r in store.runs(in_spec=None)] == ["a", "b", "c"]
        assert store.counts()["pending"] == 2


def test_open_refuses_missing_foreign_and_other_versions(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no study"):
        Store.open(tmp_path / "none")
    make(tmp_path).close()
    with pytest.raises(ValueError, match="holds the study 's', not 'other'"):
        make(tmp_path, name="other")
    con = sqlite3.connect(tmp_path / STORE_FILE)
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match=f"schema version 99, this depthwidth reads version {SCHEMA_VERSION}"):
        Store.open(tmp_path)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / STORE_FILE).write_bytes(b"not a database at all" * 100)
    with pytest.raises(ValueError, match="not a readable study store"):
        Store.open(tmp_path / "junk")
