"""A study killed with SIGKILL at a random moment and started again ends with exactly the stored losses
and curves of an uninterrupted run, without running again what had finished."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

from depthwidth.study import Store, run_study
from depthwidth.study.store import STORE_FILE


def finished_runs(folder) -> dict[str, tuple]:
    path = folder / STORE_FILE
    if not path.is_file():
        return {}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        rows = con.execute("SELECT run_id, status, started_at, finished_at, attempts FROM runs").fetchall()
        con.close()
    except sqlite3.OperationalError:  # created but no tables yet
        return {}
    return {r[0]: r[1:] for r in rows if r[1] in ("completed", "diverged")}


def test_sigkill_at_a_random_moment_then_resume(reference, numbers, tmp_path):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    folder = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "depthwidth", "study", "run", str(reference.spec),
                             "--dir", str(folder), "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # kill it at a random moment: after a random number of finished runs, a random time into the next one
    with Store.open(reference.dir) as store:
        run_seconds = min(r.wall_seconds for r in store.runs(kind="train"))
    target = rng.randint(0, 3)
    delay = rng.uniform(0.0, run_seconds)
    deadline = time.monotonic() + 120
    while len(finished_runs(folder)) < target and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the study ended before the kill (seed {seed})"
    before = finished_runs(folder)

    report = run_study(reference.spec, study_dir=folder)
    where = f"seed {seed}: kill after {target} runs + {delay:.2f} s"
    assert report.failed == 0 and report.skipped == len(before), where
    after = finished_runs(folder)
    for run_id, row in before.items():  # finished runs were not run again
        assert after[run_id] == row
    assert numbers(folder) == numbers(reference.dir), where
    with Store.open(folder) as store:
        assert store.counts() == {"pending": 0, "running": 0, "completed": 6, "diverged": 0, "failed": 0}
