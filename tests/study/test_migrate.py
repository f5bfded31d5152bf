"""A study folder written before the run format became `TrainConfig`'s own dict (store schema 1, run
format 1; `data/v1-study` was written by depthwidth 0.1.0 from `data/v1-study.toml`, checkpoints left
out) still opens, reports, and resumes without retraining its finished runs."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from depthwidth.study import Store, expand, load_spec, run_study
from depthwidth.study.expand import DataInfo
from depthwidth.study.jobs import Outcome, run_dir
from depthwidth.study.store import SCHEMA_VERSION

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
    import depthwidth.study.migrate as migrate
    from depthwidth.errors import UserError

    def readonly(conn):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(migrate, "_rekey", readonly)
    with pytest.raises(UserError, match=r"schema version 1 needs an upgrade to version 2, which failed \(attempt to "
                                        r"write a readonly database\); make the folder writable"):
        Store.open(old)
    assert _raw(old)[0] == "1" and len(_raw(old)[1]) == 6
    monkeypatch.undo()
    with Store.open(old) as store:  # a later open upgrades it
        assert len(store.results()) == 6
