"""The same tiny study through a real local Ray cluster gives exactly the stored numbers of the local
executor; a worker killed mid-run is retried and its run still ends with the same numbers."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from depthwidth.study import Store, run_study
from depthwidth.study.executors.ray import MAX_TEMP_DIR_CHARS, ray_temp_dir

ray = pytest.importorskip("ray", reason="the ray extra is not installed")


class KillFirstAttempt:
    """A job function that SIGKILLs its Ray worker the first time it sees `victim` (a marker file makes
    the retry go through), and otherwise runs the real job."""

    def __init__(self, *, victim: str, marker: str) -> None:
        self.victim, self.marker = victim, marker

    def __call__(self, job, progress=None):
        from depthwidth.study.jobs import execute

        if job.run_id == self.victim and not os.path.exists(self.marker):
            Path(self.marker).write_text("killed once")
            os.kill(os.getpid(), signal.SIGKILL)
        return execute(job, progress=progress)


@pytest.mark.slow  # ray's start-up: ~40 s on 2 cores
def test_ray_executor_matches_local(reference, numbers, tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with Store.open(reference.dir) as store:
        victim = store.runs(kind="train")[-1].run_id
    folder = tmp_path / "ray-study"
    job_fn = KillFirstAttempt(victim=victim, marker=str(tmp_path / "killed"))
    report = run_study(reference.spec, study_dir=folder, executor="ray", job_fn=job_fn)
    assert (report.completed, report.failed, report.retries) == (6, 0, 1)
    assert report.executor.startswith("ray, local cluster")
    assert numbers(folder) == numbers(reference.dir)
    with Store.open(folder) as store:
        run = store.run(victim)
        assert run.attempts == 2 and run.status == "completed"
        ((attempt, _, message),) = store.attempt_errors(victim)
        assert attempt == 1 and message.startswith("Ray worker failed:")
    assert not ray.is_initialized()  # the executor shut down the cluster it started


def test_long_study_paths_get_a_short_ray_temp_dir(tmp_path):
    short, note = ray_temp_dir(tmp_path / "s")
    if len(str(tmp_path / "s" / "ray")) <= MAX_TEMP_DIR_CHARS:
        assert short == str(tmp_path / "s" / "ray") and note is None
    long_dir = tmp_path / ("x" * 60)
    temp, note = ray_temp_dir(long_dir)
    assert len(temp) <= MAX_TEMP_DIR_CHARS and "too long for Ray's Unix sockets" in note
    os.rmdir(temp)
