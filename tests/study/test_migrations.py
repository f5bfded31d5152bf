"""Stored studies brought up to date by the numbered migrations of `depthwidth.study.migrations`.

A study folder written before the run format became `TrainConfig`'s own dict (store schema 1, run
format 1; `data/v1-study` was written by depthwidth 0.1.0 from `data/v1-study.toml`, checkpoints left
out) still opens, reports, and resumes without retraining its finished runs. The registry applies each
migration once, in order, in its own transaction, and records it; a failed one loses nothing."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import depthwidth.study.migrations as migrations
from depthwidth.errors import UserError
from depthwidth.study import Store, expand, load_spec, run_study
from depthwidth.study.expand import DataInfo
from depthwidth.study.jobs import Outcome, run_dir
from depthwidth.study.migrations import MIGRATIONS, SCHEMA_VERSION, Migration, applied_migrations
from depthwidth.study.run_config import TRAIN_FORMAT, TRAIN_FORMAT_STEPS, config_hash, upgrade_run_config

DATA = Path(__file__).parent / "data"


@pytest.fixture
def old(tmp_path) -> Path:
    folder = tmp_path / "old-study"
    shutil.copytree(DATA / "v1-study", folder)
    return folder


def _raw(folder: Path) -> tuple[str, list[tuple[str, str, str]], int, int]:
    with sqlite3.connect(folder / "study.sqlite") as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        runs = conn.execute("SELECT run_id, kind, status FROM runs ORDER BY rowid").fetchall()
        curves = conn.execute("SELECT COUNT(*) FROM curves").fetchone()[0]
        results = conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    return version, runs, curves, results


def test_the_fixture_is_schema_1_with_six_finished_runs(old):
    version, runs, curves, results = _raw(old)
    assert version == "1" and len(runs) == 6 and {r[2] for r in runs} == {"completed"}
    assert results == 6 and curves > 0
    with sqlite3.connect(old / "study.sqlite") as conn:
        config = json.loads(conn.execute("SELECT config FROM runs WHERE kind = 'train'").fetchone()[0])
    assert config["format"] == 1 and "min_lr_ratio" in config["train"]


def test_opening_upgrades_in_place_and_keeps_everything(old):
    _, before, curves, results = _raw(old)
    with Store.open(old) as store:
        runs = store.runs()
        assert len(runs) == 6 and all(r.finished for r in runs)
        assert len(store.results()) == results
        assert sum(len(store.curves(r.run_id)) for r in runs) == curves
        train = [r for r in runs if r.kind == "train"]
        assert all(r.config["format"] == 2 and r.config["train"]["min_lr"] == pytest.approx(0.1 * r.lr)
                   for r in train)
    version, after, _, _ = _raw(old)
    assert version == str(SCHEMA_VERSION) == "2"
    old_ids = {r[0] for r in before if r[1] == "train"}
    assert old_ids.isdisjoint(r[0] for r in after)  # training runs have new ids ...
    assert {r[0] for r in before if r[1] == "bench"} == {r[0] for r in after if r[1] == "bench"}  # bench: same
    backup = old / "study.sqlite.v1.bak"
    with sqlite3.connect(backup) as conn:  # ... and the schema-1 store is kept as it was
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
        assert {r[0] for r in conn.execute("SELECT run_id FROM runs WHERE kind = 'train'")} == old_ids
    for r in after:  # each run folder follows its run's new id
        assert run_dir(old, r[0]).is_dir() == (r[1] == "train")


def test_the_new_ids_are_what_the_spec_expands_to_now(old):
    with Store.open(old) as store:
        stored = {r.run_id for r in store.runs()}
        config = next(r.config for r in store.runs(kind="train"))
    data = DataInfo(corpus_hash=config["corpus_hash"], vocab_size=256, train_tokens=10**6)
    expansion = expand(load_spec(DATA / "v1-study.toml"), data=data)
    assert {r.run_id for r in expansion.runs} == stored


def test_resuming_trains_only_what_is_new(old, tmp_path):
    with Store.open(old) as store:
        stored_hash = next(r.config for r in store.runs(kind="train"))["corpus_hash"]
    spec = tmp_path / "more-seeds.toml"
    spec.write_text((DATA / "v1-study.toml").read_text().replace("seeds = [0]", "seeds = [0, 1]"))
    expansion = expand(load_spec(spec))
    if expansion.data.corpus_hash != stored_hash:
        pytest.skip("this Python's pydoc_data differs from the one the fixture was written with")
    calls = []

    def fake(job, progress=None):
        calls.append(job)
        return Outcome(run_id=job.run_id, status="completed", result={"val_loss": 5.0, "tokens": 64},
                       curve=({"step": 4, "tokens": 64, "val_loss": 5.0},), wall_seconds=0.01)

    report = run_study(spec, study_dir=old, job_fn=fake)
    assert (report.total, report.skipped, report.new, report.completed) == (10, 6, 4, 4)
    assert sorted(j.config["train"]["seed"] for j in calls) == [1, 1, 1, 1]


def test_status_and_report_open_an_old_folder(old):
    proc = subprocess.run([sys.executable, "-m", "depthwidth", "study", "status", str(old), "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(proc.stdout)
    assert status["counts"]["completed"] == 6 and status["fair"] is True
    from depthwidth.report.data import load_study

    study = load_study(old)
    assert len(study.results) == 2 and study.protocol.tokens_by_group == {"shapes": 4 * 4 * 16}


def test_a_failed_upgrade_names_the_version_and_the_fix_and_loses_nothing(old, monkeypatch):
    def readonly(conn, path):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(migrations, "MIGRATIONS", (Migration(version=2, name="read-only", apply=readonly),))
    with pytest.raises(UserError, match=r"schema version 1 needs an upgrade to version 2, which failed \(attempt to "
                                        r"write a readonly database\); make the folder writable"):
        Store.open(old)
    assert _raw(old)[0] == "1" and len(_raw(old)[1]) == 6
    monkeypatch.undo()
    with Store.open(old) as store:  # a later open upgrades it
        assert len(store.results()) == 6


# ---- the registry ----------------------------------------------------------------------------------
def _dump(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "study.sqlite") as conn:
        return list(conn.iterdump())


def _migrations(folder: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(folder / "study.sqlite") as conn:
        return [(version, name) for version, name, _ in applied_migrations(conn)]


def _meta(folder: Path, key: str) -> str | None:
    with sqlite3.connect(folder / "study.sqlite") as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def test_the_registries_are_numbered_in_order_and_each_is_listed_in_the_docstring():
    assert [m.version for m in MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))
    assert [s.format for s in TRAIN_FORMAT_STEPS] == list(range(2, TRAIN_FORMAT + 1))
    doc = " ".join(migrations.__doc__.split())
    for m in MIGRATIONS:
        assert f"{m.version} {m.name}" in doc
    for s in TRAIN_FORMAT_STEPS:
        assert f"{s.format} {s.name}" in doc
    assert "OMITTED_AT_DEFAULT" in doc


def test_the_v1_upgrade_is_recorded_as_migration_2(old):
    Store.open(old).close()
    assert _migrations(old) == [(2, "train runs in run format 2")]


def test_an_up_to_date_store_opens_unchanged(old, tmp_path):
    fresh = Store.create(tmp_path / "fresh", name="s", spec={}, spec_text="", source="test")
    fresh.close()
    before = _dump(tmp_path / "fresh")
    Store.open(tmp_path / "fresh").close()
    assert _dump(tmp_path / "fresh") == before and _migrations(tmp_path / "fresh") == []
    assert not list((tmp_path / "fresh").glob("*.bak"))
    Store.open(old).close()  # an upgraded one too: nothing applied again
    before = _dump(old)
    Store.open(old).close()
    assert _dump(old) == before and _migrations(old) == [(2, "train runs in run format 2")]


def test_a_new_migration_is_applied_once_in_order_and_recorded(old, monkeypatch):
    calls = []

    def add_key(conn, path):
        calls.append(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        conn.execute("INSERT INTO meta(key, value) VALUES ('extra', 'yes')")
        return lambda: calls.append("after commit")

    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, Migration(version=3, name="extra key", apply=add_key)))
    with Store.open(old) as store:  # schema 1 -> 2 -> 3
        assert len(store.results()) == 6
    assert calls == ["2", "after commit"]  # 3 ran on a store migration 2 had finished
    assert _meta(old, "schema_version") == "3" and _meta(old, "extra") == "yes"
    assert _migrations(old) == [(2, "train runs in run format 2"), (3, "extra key")]
    assert (old / "study.sqlite.v1.bak").is_file() and (old / "study.sqlite.v2.bak").is_file()
    with Store.open(old) as store:  # ... and not again
        assert len(store.results()) == 6
    assert calls == ["2", "after commit"] and len(_migrations(old)) == 2
    monkeypatch.undo()  # this code knows no version 3: refused in one line
    with pytest.raises(UserError) as err:
        Store.open(old)
    assert str(err.value) == f"{old / 'study.sqlite'}: schema version 3, this depthwidth reads version 2"


@pytest.mark.parametrize("error", [RuntimeError("a defect"), sqlite3.OperationalError("disk I/O error")])
def test_a_failing_migration_leaves_the_store_at_its_previous_version(old, monkeypatch, error):
    Store.open(old).close()
    before = _dump(old)

    def half_done(conn, path):
        conn.execute("INSERT INTO meta(key, value) VALUES ('extra', 'half')")
        conn.execute("DELETE FROM curves")
        raise error

    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, Migration(version=3, name="fails", apply=half_done)))
    with pytest.raises((RuntimeError, UserError)) as err:
        Store.open(old)
    if isinstance(error, sqlite3.OperationalError):
        assert str(err.value).startswith(f"{old / 'study.sqlite'}: schema version 2 needs an upgrade to version 3, "
                                         "which failed (disk I/O error)")
    assert _dump(old) == before  # version 2, every row, no record of 3
    assert (old / "study.sqlite.v2.bak").is_file()
    monkeypatch.undo()
    with Store.open(old) as store:
        assert len(store.results()) == 6


@pytest.mark.parametrize("version", ["99", "0", "02", ""])
def test_a_version_this_code_does_not_know_is_refused_in_one_line(old, version):
    Store.open(old).close()
    with sqlite3.connect(old / "study.sqlite") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    before = _dump(old)
    with pytest.raises(UserError) as err:
        Store.open(old)
    assert str(err.value) == f"{old / 'study.sqlite'}: schema version {version}, this depthwidth reads version 2"
    assert _dump(old) == before


def test_a_migration_needs_a_consecutive_registry(old, monkeypatch):
    monkeypatch.setattr(migrations, "MIGRATIONS", (*MIGRATIONS, Migration(version=4, name="gap", apply=print)))
    with pytest.raises(RuntimeError, match=r"numbered 2, 3, ... in order, not \[2, 4\]"):
        migrations.migrate(sqlite3.connect(":memory:"), old / "study.sqlite")


def test_run_format_steps_convert_on_read_and_leave_the_current_format_alone(old):
    with sqlite3.connect(old / "study.sqlite") as conn:
        stored = [json.loads(c) for (c,) in conn.execute("SELECT config FROM runs WHERE kind = 'train'")]
    upgraded = [upgrade_run_config(c) for c in stored]
    assert {c["format"] for c in stored} == {1} and {c["format"] for c in upgraded} == {TRAIN_FORMAT}
    assert [upgrade_run_config(c) for c in upgraded] == upgraded
    bench = {"kind": "bench", "format": 1, "shape": {}}
    assert upgrade_run_config(bench) is bench
    with Store.open(old) as store:
        assert {r.run_id for r in store.runs(kind="train")} == {config_hash(c) for c in upgraded}
