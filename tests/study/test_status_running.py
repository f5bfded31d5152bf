"""`study status` while a study runs: each run in flight with its step of steps and ETA, from the driver's
live record, else from the last stored curve point; nothing in flight once the driver is gone."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from depthwidth.cli.study import status_cmd
from depthwidth.study import Store, run_study
from depthwidth.study import eta as eta_module
from depthwidth.study.eta import LIVE_FILE, LiveRecord, read_live, running_runs
from depthwidth.study.jobs import Outcome
from depthwidth.study.runner import StudyEvent

SPEC = """\
name = "live"
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 3
[lr]
grid = [1e-3, 2e-3]
[bench]
enabled = false
[[shape]]
n_layers = 1
d_model = 16
n_heads = 2
"""


@pytest.fixture
def spec(tmp_path, tiny_corpus):
    path = tmp_path / "live.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    return path


def _status(folder, capsys, *, as_json: bool):
    capsys.readouterr()
    assert status_cmd(argparse.Namespace(dir=str(folder), json=as_json)) == 0
    out = capsys.readouterr().out
    return json.loads(out) if as_json else out


def test_status_shows_the_run_in_flight_from_the_live_record(spec, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(eta_module, "LIVE_EVERY", 0.0)  # every event rewrites the record
    folder = tmp_path / "s"
    seen = []

    def job(job, progress=None):
        progress(phase="train", step=2, steps=3, loss=2.5, tokens_per_s=640.0, eta_s=1.5)
        seen.append((job.run_id, job.label, _status(folder, capsys, as_json=True),
                     _status(folder, capsys, as_json=False)))
        curve = ({"step": 3, "tokens": 96, "val_loss": 3.0},)
        return Outcome(run_id=job.run_id, status="completed", result={"val_loss": 3.0, "tokens": 96}, curve=curve,
                       wall_seconds=0.01)

    run_study(spec, study_dir=folder, job_fn=job)
    assert len(seen) == 2
    for run_id, label, data, text in seen:
        assert data["running"] is True
        assert data["running_runs"] == [{"run_id": run_id, "label": label, "step": 2, "steps": 3, "eta_s": 1.5,
                                         "source": "live"}]
        assert "running now" in text and label in text and run_id[:10] in text
        row = next(line for line in text.splitlines() if label in line)
        assert "2/3" in row and "1.5 s" in row
    assert not (folder / LIVE_FILE).exists()  # the study ended: the record is gone
    data = _status(folder, capsys, as_json=True)
    assert data["running"] is False and data["running_runs"] == []
    assert "running now" not in _status(folder, capsys, as_json=False)


def test_rows_left_running_by_a_dead_driver_are_not_in_flight(spec, tmp_path, capsys):
    def failing(job, progress=None):
        return Outcome(run_id=job.run_id, status="failed", result=None, error="RuntimeError: boom")

    folder = tmp_path / "s"
    run_study(spec, study_dir=folder, job_fn=failing)
    with Store.open(folder) as store:
        run_id = store.runs()[0].run_id
        store.mark_running(run_id)  # as a killed driver leaves it
    data = _status(folder, capsys, as_json=True)
    assert data["running_runs"] == [] and data["counts"]["interrupted"] == 1


def test_without_a_live_record_the_last_curve_point_gives_step_and_eta(spec, tmp_path):
    def done(job, progress=None):
        return Outcome(run_id=job.run_id, status="completed", result={"val_loss": 3.0}, wall_seconds=0.01)

    run_study(spec, study_dir=tmp_path / "s", job_fn=done)
    with Store.open(tmp_path / "s") as store:
        first, second = store.runs()
    running = [SimpleNamespace(**{**first.to_dict(), "status": "running"}),
               SimpleNamespace(**{**second.to_dict(), "status": "running"})]
    curves = {first.run_id: [SimpleNamespace(step=1, tokens_per_s=None), SimpleNamespace(step=2, tokens_per_s=16.0)]}

    class Fake:
        def runs(self, *, status=None):
            assert status == "running"
            return running

        def curves(self, run_id):
            return curves.get(run_id, [])

    rows = running_runs(Fake(), live={})
    # 1 step left of 2 x 16 tokens at 16 tok/s: 2 s; the second run has no curve: its steps, no ETA
    assert [r.to_dict() for r in rows] == [
        {"run_id": first.run_id, "label": "L1-H16-A2 lr=0.001 seed=0", "step": 2, "steps": 3, "eta_s": 2.0,
         "source": "curve"},
        {"run_id": second.run_id, "label": "L1-H16-A2 lr=0.002 seed=0", "step": None, "steps": 3, "eta_s": None,
         "source": "curve"}]


def test_live_record_is_throttled_and_forgets_finished_runs(tmp_path):
    now = [0.0]
    seen = []
    record = LiveRecord(tmp_path, seen.append, clock=lambda: now[0], every=2.0)
    record(StudyEvent(kind="start", total=2, todo=2))
    assert read_live(tmp_path) == {}
    record(StudyEvent(kind="run_start", run_id="a", label="A", attempt=1))
    assert read_live(tmp_path) == {}  # within 2 s of the last write
    now[0] = 2.5
    record(StudyEvent(kind="run_progress", run_id="a", progress={"step": 1, "steps": 4, "loss": 3.0, "eta_s": 9.0}))
    entry = read_live(tmp_path)["a"]
    assert (entry["label"], entry["step"], entry["steps"], entry["eta_s"]) == ("A", 1, 4, 9.0)
    now[0] = 5.0
    record(StudyEvent(kind="run_end", run_id="a", label="A", status="completed", total=2, done=1))
    assert read_live(tmp_path) == {}
    record(StudyEvent(kind="done", total=2, done=2))
    assert not (tmp_path / LIVE_FILE).exists()
    assert [e.kind for e in seen] == ["start", "run_start", "run_progress", "run_end", "done"]  # all handed on
    (tmp_path / LIVE_FILE).write_text("{not json")
    assert read_live(tmp_path) == {}
