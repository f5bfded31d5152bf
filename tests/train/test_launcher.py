"""`depthwidth train --nproc 2`: the ranks live and die with their launcher. A launcher killed with SIGKILL
takes its ranks with it (none is alive a few seconds later, none writes the folder after it), and a
`--resume` started at once continues the run to the losses of an uninterrupted one; while a run uses its
folder a second run there is refused (the folder's lock); a rank that dies is named, with its signal, in
one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import make_text

HERE = Path(__file__).parent
STEPS = 24


def _env() -> dict:
    src = str(HERE.parents[1] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launcher")
    corpus = tmp / "corpus.txt"
    corpus.write_text(make_text())
    return tmp, corpus


def _argv(corpus: Path, cache: Path, out: Path, *extra: str, steps: int = STEPS) -> list[str]:
    return [sys.executable, "-m", "depthwidth", "train", "--layers", "2", "--width", "32", "--heads", "2",
            "--data", str(corpus), "--seq-len", "32", "--batch-size", "4", "--steps", str(steps), "--threads", "1",
            "--eval-windows", "8", "--cache-dir", str(cache), "--peak-flops", "1e11", "--nproc", "2",
            "--checkpoint-every", "2", "--out", str(out), "--json", *extra]


def _started(out: Path, *, steps: int = STEPS, **popen) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A 2-process run, once its first checkpoint is written: (the launcher, its two ranks)."""
    tmp, corpus = out.parent, out.parent / "corpus.txt"
    proc = subprocess.Popen(_argv(corpus, tmp / "cache", out, steps=steps), env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, **popen)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert (out / "checkpoint.pt").is_file(), "the run wrote no checkpoint"
    ranks = psutil.Process(proc.pid).children()
    assert len(ranks) == 2, ranks
    return proc, sorted(ranks, key=lambda p: int(p.environ()["RANK"]))


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _losses(folder: Path) -> list[float]:
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "completed", result.get("error")
    return [c["loss"] for c in result["curve"]]


@pytest.mark.slow
def test_a_killed_launcher_takes_its_ranks_and_an_immediate_resume_matches(setup):
    tmp, corpus = setup
    ref = tmp / "ref"
    subprocess.run(_argv(corpus, tmp / "cache", ref), env=_env(), check=True, stdout=subprocess.DEVNULL)
    out = tmp / "killed"
    launcher, ranks = _started(out)
    os.kill(launcher.pid, signal.SIGKILL)  # the launcher alone: its ranks get no signal from anyone else
    launcher.wait()
    deadline = time.time() + 5
    while not all(_gone(r) for r in ranks) and time.time() < deadline:
        time.sleep(0.05)
    assert all(_gone(r) for r in ranks), "a rank outlived its launcher"
    assert not (out / "result.json").exists()
    resumed = subprocess.run(_argv(corpus, tmp / "cache", out, "--resume"), env=_env(), capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert _losses(out) == _losses(ref)  # bit for bit, as a run never killed
    assert json.loads(resumed.stdout)["resumes"]


def test_a_run_locks_its_folder_and_a_dead_rank_is_named_in_one_line(setup):
    tmp, corpus = setup
    out = tmp / "locked"
    launcher, ranks = _started(out, steps=400, stderr=subprocess.PIPE, text=True)
    try:
        second = subprocess.run(_argv(corpus, tmp / "cache", out, "--resume", steps=400), env=_env(),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert second.stderr == (f"depthwidth train: error: {out} is being run by another process (pid "
                                 f"{launcher.pid}); wait for it or stop it first\n")
        ranks[1].kill()
        _, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert launcher.returncode == 2
    assert err == ("depthwidth train: error: rank 1 of the 2-process run was killed by signal 9 (SIGKILL); the other "
                   "ranks were stopped\n")
    assert all(_gone(r) for r in ranks)
