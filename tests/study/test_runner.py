"""The driver: skip what is finished, retry a failed attempt once, record errors, one driver per folder.
A stand-in job function replaces training here (the real trainer is exercised in test_kill_resume)."""

from __future__ import annotations

import pytest

from depthwidth.study import Store, run_study, summarize
from depthwidth.study.jobs import Outcome
from depthwidth.study.runner import StudyLock

SPEC = """\
name = "fake"
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 3
[lr]
grid = [1e-3, 2e-3, 4e-3]
[bench]
enabled = false
[[shape]]
n_layers = 1
d_model = 16
n_heads = 2
[[shape]]
n_layers = 2
d_model = 16
n_heads = 2
"""


class FakeJobs:
    """Loss = a parabola in log lr with its minimum at 2e-3 (deeper shapes 0.1 better); `fail` maps a
    (n_layers, lr) to how many first attempts raise."""

    def __init__(self, fail: dict | None = None) -> None:
        self.calls: list[str] = []
        self.fail = dict(fail or {})

    def __call__(self, job, progress=None) -> Outcome:
        self.calls.append(job.run_id)
        key = (job.config["shape"]["n_layers"], job.config["train"]["lr"])
        if self.fail.get(key, 0) > 0:
            self.fail[key] -= 1
            return Outcome(run_id=job.run_id, status="failed", result=None, error=f"RuntimeError: boom {key}")
        import math

        loss = 3.0 + (math.log(job.config["train"]["lr"] / 2e-3)) ** 2 - 0.1 * key[0]
        result = {"val_loss": loss, "tokens": 96, "batch_stream_hash": f"seed{job.config['train']['seed']}",
                  "train_seconds": 0.01}
        curve = ({"step": 1, "tokens": 32, "train_loss": loss + 1}, {"step": 3, "tokens": 96, "val_loss": loss})
        return Outcome(run_id=job.run_id, status="completed", result=result, curve=curve, wall_seconds=0.01)


@pytest.fixture
def spec(tmp_path, tiny_corpus):
    path = tmp_path / "fake.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    return path


def test_resume_skips_finished_runs(spec, tmp_path):
    jobs = FakeJobs()
    first = run_study(spec, study_dir=tmp_path / "s", job_fn=jobs)
    assert (first.total, first.completed, first.skipped, first.new) == (6, 6, 0, 6)
    again = FakeJobs()
    second = run_study(spec, study_dir=tmp_path / "s", job_fn=again)
    assert again.calls == [] and (second.skipped, second.completed, second.new) == (6, 0, 0)
    with Store.open(tmp_path / "s") as store:
        summary = summarize(store)
    assert [(c.shape_label, c.best_lr, c.edge, c.warning) for c in summary.choices] == [
        ("L1-H16-A2", 2e-3, None, None), ("L2-H16-A2", 2e-3, None, None)]
    assert summary.rows[1].val_loss == pytest.approx(2.8) and summary.fairness.fair


def test_failed_attempt_is_retried_once_then_marked_failed(spec, tmp_path):
    jobs = FakeJobs(fail={(1, 1e-3): 1, (2, 4e-3): 5})
    report = run_study(spec, study_dir=tmp_path / "s", job_fn=jobs)
    assert (report.completed, report.failed, report.retries) == (5, 1, 2)
    assert len(jobs.calls) == 8  # 6 runs + one retry each for the two failing ones
    with Store.open(tmp_path / "s") as store:
        failed = store.runs(status="failed")
        assert [(r.shape_label, r.lr, r.attempts, r.error) for r in failed] == [
            ("L2-H16-A2", 4e-3, 2, "RuntimeError: boom (2, 0.004)")]
        retried = next(r for r in store.runs() if r.shape_label == "L1-H16-A2" and r.lr == 1e-3)
        assert (retried.status, retried.attempts) == ("completed", 2)
        summary = summarize(store)
    assert any(w.startswith("failed: L2-H16-A2 lr=0.004 seed=0: RuntimeError: boom") for w in summary.warnings)
    # a new invocation runs the failed run again (and only it)
    again = FakeJobs()
    report = run_study(spec, study_dir=tmp_path / "s", job_fn=again)
    assert len(again.calls) == 1 and report.completed == 1 and report.skipped == 5


def test_one_driver_per_study_and_interrupted_runs(spec, tmp_path):
    folder = tmp_path / "s"
    with StudyLock(folder):
        with pytest.raises(ValueError, match="is being run by another process"):
            run_study(spec, study_dir=folder, job_fn=FakeJobs())
    run_study(spec, study_dir=folder, job_fn=FakeJobs())
    with Store.open(folder) as store:  # a killed driver leaves a run marked running
        run_id = store.runs()[0].run_id
        store._conn.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (run_id,))
        summary = summarize(store, running=False)
    assert summary.counts["interrupted"] == 1 and summary.counts["running"] == 0 and not summary.complete


def test_missing_ray_extra_is_one_clear_error_before_anything_is_written(spec, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # as if the extra were not installed
    with pytest.raises(ValueError, match=r"the ray executor needs the ray extra: pip install 'depthwidth\[ray\]'"):
        run_study(spec, study_dir=tmp_path / "s", executor="ray", job_fn=FakeJobs())
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="executor='dask' is not known; expected one of local, ray"):
        run_study(spec, study_dir=tmp_path / "s", executor="dask", job_fn=FakeJobs())
