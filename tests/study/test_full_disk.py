"""A study whose disk fills: `study run` ends in one line naming the store and the cause (exit 2), the
store is not reported damaged, `study status`, `show`, `report` and `repair` read it as it was, and the
same command run again once there is space finishes the study with the numbers of an uninterrupted one.

The full disk is SQLite's own: `PRAGMA max_page_count` set to the store's size on every connection makes
the next write that needs a page fail with SQLITE_FULL ("database or disk is full"), inside SQLite, as a
full disk does. Where the machine lets a test mount one (a mount namespace: `unshare -rm`), a small tmpfs
fills for real, and is then grown to free space."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

import depthwidth.study
from depthwidth.cli import main
from depthwidth.study import Store, run_study
from depthwidth.study.jobs import Outcome
from depthwidth.study.repair import repair_study
from depthwidth.study.store import STORE_FILE, StoreAccessError
from depthwidth.study import store_errors

SPEC = """\
name = "full"
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 120
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
NO_SPACE = os.strerror(errno.ENOSPC)


class Jobs:
    """A stand-in for training: loss a parabola in log lr, a 120-point curve (several store pages per run)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, job, progress=None) -> Outcome:
        self.calls.append(job.run_id)
        lr, layers = job.config["train"]["lr"], job.config["shape"]["n_layers"]
        loss = 3.0 + math.log(lr / 2e-3) ** 2 - 0.1 * layers
        curve = tuple({"step": s, "tokens": 32 * s, "train_loss": loss + 1 / s, "lr": lr} for s in range(1, 121))
        return Outcome(run_id=job.run_id, status="completed", curve=curve, wall_seconds=0.01,
                       result={"val_loss": loss, "tokens": 3840, "batch_stream_hash": "s0", "train_seconds": 0.01})


class Disk:
    """Every SQLite connection opened while `full` (and every open one at `fill()`) may not grow the
    database beyond its size: its next write that needs a page fails with SQLITE_FULL."""

    def __init__(self, monkeypatch) -> None:
        self.full = False
        self._connections: list[sqlite3.Connection] = []
        real = sqlite3.connect

        def connect(*args, **kwargs):
            conn = real(*args, **kwargs)
            self._connections.append(conn)
            if self.full:
                self._limit(conn)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    @staticmethod
    def _limit(conn: sqlite3.Connection) -> None:
        with contextlib.suppress(sqlite3.ProgrammingError):  # closed already
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(pages, 1)}")

    def fill(self) -> None:
        self.full = True
        for conn in self._connections:
            self._limit(conn)

    def fill_at_record(self, monkeypatch, n: int) -> None:
        """Fill the disk just before the driver stores its `n`-th finished run."""
        real, seen = Store.record_finished, []

        def record_finished(store, run_id, **kwargs):
            seen.append(run_id)
            if len(seen) == n:
                self.fill()
            return real(store, run_id, **kwargs)

        monkeypatch.setattr(Store, "record_finished", record_finished)


@pytest.fixture
def spec(tmp_path, tiny_corpus) -> Path:
    path = tmp_path / "full.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    return path


@pytest.fixture
def uninterrupted(spec, tmp_path) -> Path:
    folder = tmp_path / "uninterrupted"
    report = run_study(spec, study_dir=folder, job_fn=Jobs())
    assert (report.completed, report.failed) == (6, 0)
    return folder


def _stored(folder: Path) -> dict:
    """Every run's status with its stored result and curve (timings aside)."""
    with Store.open(folder) as store:
        return {r.run_id: (r.status, None if store.result(r.run_id) is None else store.result(r.run_id).data,
                           [p.to_dict() for p in store.curves(r.run_id)]) for r in store.runs()}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp") or "-journal" in p.name)


def test_a_disk_that_fills_mid_study_is_one_line_and_the_study_resumes(spec, uninterrupted, tmp_path, monkeypatch,
                                                                       cli_error, capsys):
    folder, store_file = tmp_path / "s", tmp_path / "s" / STORE_FILE
    disk, jobs = Disk(monkeypatch), Jobs()
    disk.fill_at_record(monkeypatch, 4)
    monkeypatch.setattr(depthwidth.study, "run_study", partial(run_study, job_fn=jobs))
    line = cli_error(["study", "run", str(spec), "--dir", str(folder), "--json"])
    assert line == (f"depthwidth study: error: {store_file}: cannot write the study store ({NO_SPACE}); nothing "
                    "stored in it is lost: free some space, then run the same command again")
    assert "damaged" not in line and "repair" not in line and len(jobs.calls) == 4

    # what was stored before the disk filled is there, as the uninterrupted study stored it; the run whose
    # outcome could not be written reads as interrupted (its row is still `running`)
    expected, stored = _stored(uninterrupted), _stored(folder)
    assert [s for s, _, _ in stored.values()] == ["completed"] * 3 + ["running", "pending", "pending"]
    assert all(stored[r] == expected[r] for r in list(stored)[:3])
    assert _leftovers(folder) == []
    assert main(["study", "status", str(folder), "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert (counts["completed"], counts["interrupted"], counts["pending"]) == (3, 1, 2)
    assert main(["study", "show", str(folder), "--json"]) == 0
    assert [r["status"] for r in json.loads(capsys.readouterr().out)["runs"]] == [s for s, _, _ in stored.values()]
    out = tmp_path / "report"
    assert main(["report", str(folder), "-o", str(out), "--bootstrap", "2", "--hardware", "h100", "--json"]) == 0
    capsys.readouterr()
    csv = (out / "results.csv").read_text()
    assert len(csv.splitlines()) > 1 and "L1-H16-A2" in csv

    # space freed: the store is intact, the same command finishes the study, the 3 stored runs not run again
    disk.full = False
    monkeypatch.undo()
    assert repair_study(folder).store == "intact" and not (tmp_path / "s" / f"{STORE_FILE}.damaged").exists()
    again = Jobs()
    monkeypatch.setattr(depthwidth.study, "run_study", partial(run_study, job_fn=again))
    assert main(["study", "run", str(spec), "--dir", str(folder), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["run"]["skipped"], summary["run"]["completed"]) == (3, 3)
    assert again.calls == list(stored)[3:]
    assert _stored(folder) == expected


def test_a_run_whose_own_files_fill_the_disk_stops_the_study_in_one_line(spec, uninterrupted, tmp_path, monkeypatch,
                                                                       cli_error):
    """The disk fills while a run writes its checkpoint: that run goes back to pending (not failed, not retried
    on a full disk), nothing new starts, one line names the file and exit 2; the same command then finishes."""
    from depthwidth.study import jobs as jobs_module

    folder, fake, calls = tmp_path / "s", Jobs(), []

    def train(job, *, progress):  # the run's own write hits a full disk on the third run
        calls.append(job.run_id)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, NO_SPACE, str(Path(job.run_dir) / "checkpoint.pt"))
        o = fake(job)
        return o.status, o.result, list(o.curve), None, ()

    monkeypatch.setattr(jobs_module, "_train", train)
    through_execute = partial(jobs_module.execute)  # not `execute` itself: runs in this process
    monkeypatch.setattr(depthwidth.study, "run_study", partial(run_study, job_fn=through_execute))
    line = cli_error(["study", "run", str(spec), "--dir", str(folder), "--json"])
    checkpoint = Path(folder) / "runs" / calls[2][:16] / "checkpoint.pt"
    assert line == (f"depthwidth study: error: {checkpoint}: cannot write the run's files ({NO_SPACE}); the study "
                    "stopped and nothing stored is lost: free some space, then run the same command again")
    assert len(calls) == 3
    stored = _stored(folder)
    assert [s for s, _, _ in stored.values()] == ["completed"] * 2 + ["pending"] * 4
    monkeypatch.undo()
    assert run_study(spec, study_dir=folder, job_fn=Jobs()).completed == 4
    assert _stored(folder) == _stored(uninterrupted)


def test_a_disk_full_before_the_store_exists_leaves_no_store(spec, tmp_path, monkeypatch, cli_error):
    folder = tmp_path / "s"
    disk = Disk(monkeypatch)
    disk.fill()
    monkeypatch.setattr(depthwidth.study, "run_study", partial(run_study, job_fn=Jobs()))
    assert cli_error(["study", "run", str(spec), "--dir", str(folder), "--json"]) == (
        f"depthwidth study: error: {folder / STORE_FILE}: cannot create the study store ({NO_SPACE}); nothing was "
        "written: free some space, then run the same command again")
    assert not (folder / STORE_FILE).exists() and _leftovers(folder) == []  # never a half-made store
    assert cli_error(["study", "status", str(folder)]) == \
        f"depthwidth study: error: {folder} holds no study ({STORE_FILE} not found)"
    disk.full = False
    report = run_study(spec, study_dir=folder, job_fn=Jobs())
    assert (report.completed, report.new) == (6, 6)


def test_a_write_that_fails_inside_its_transaction_keeps_the_store_as_it_was(spec, uninterrupted, monkeypatch):
    """SQLite rolls the transaction back itself on SQLITE_FULL: the store's own ROLLBACK must not then
    replace the cause with "cannot rollback - no transaction is active"."""
    disk = Disk(monkeypatch)
    before = _stored(uninterrupted)
    with Store.open(uninterrupted) as store:
        run = store.runs()[0]
        disk.fill()
        with pytest.raises(StoreAccessError, match=rf"cannot write the study store \({NO_SPACE}\)"):
            store.record_finished(run.run_id, status="completed", result={"val_loss": 1.0},
                                  curve=[{"step": s, "tokens": s, "train_loss": 1.0} for s in range(1, 2000)],
                                  wall_seconds=1.0)
        assert not store._conn.in_transaction
        assert store.result(run.run_id).val_loss == before[run.run_id][1]["val_loss"]
    assert _stored(uninterrupted) == before


@pytest.mark.parametrize("free, cause, then", [
    (0, NO_SPACE, "free some space, then run the same command again"),
    (10**9, "SQLite: disk I/O error", "run the same command again once it can be opened"),
])
def test_a_store_that_cannot_be_opened_where_it_is_is_not_damaged(uninterrupted, monkeypatch, cli_error, free,
                                                                   cause, then):
    """An I/O error opening the store (SQLite's message; on a disk with no space, a full disk) is one line
    naming the file and the cause; `study repair` stops with the same line and moves nothing aside."""
    def connect(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_errors, "_free_bytes", lambda folder: free)
    monkeypatch.setattr(sqlite3, "connect", connect)
    line = f"{uninterrupted / STORE_FILE}: cannot open the study store ({cause}); nothing stored in it is lost: {then}"
    assert cli_error(["study", "status", str(uninterrupted)]) == f"depthwidth study: error: {line}"
    assert cli_error(["study", "repair", str(uninterrupted)]) == f"depthwidth study: error: {line}"
    monkeypatch.undo()
    assert sorted(p.name for p in uninterrupted.iterdir() if p.name.startswith(STORE_FILE)) == [STORE_FILE]
    assert len(_stored(uninterrupted)) == 6


def test_damage_is_still_called_damage(uninterrupted, cli_error):
    """The other side: a store SQLite finds corrupt is `damaged`, with the repair named."""
    path = uninterrupted / STORE_FILE
    data = bytearray(path.read_bytes())
    data[4096:8192] = os.urandom(4096)  # the second page
    path.write_bytes(bytes(data))
    line = cli_error(["study", "status", str(uninterrupted)])
    assert line.startswith(f"depthwidth study: error: {path}: not a readable study store: ")
    assert line.endswith(f"`depthwidth study repair {uninterrupted}` rebuilds the store from the spec and the run "
                         "folders")


def test_the_spec_copy_on_a_full_disk_names_its_file(spec, tmp_path, monkeypatch, cli_error):
    """Python names no file when a write fails on a full disk: the atomic write names its target, not the
    temporary file, and leaves nothing of it."""
    folder = tmp_path / "s"
    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(".spec.toml."):
            real(self, "name = ")
            raise OSError(errno.ENOSPC, NO_SPACE)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(depthwidth.study, "run_study", partial(run_study, job_fn=Jobs()))
    assert cli_error(["study", "run", str(spec), "--dir", str(folder), "--json"]) == \
        f"depthwidth study: error: {folder / 'spec.toml'}: {NO_SPACE}"
    assert sorted(p.name for p in folder.iterdir()) == ["study.lock", STORE_FILE]
    monkeypatch.undo()
    assert run_study(spec, study_dir=folder, job_fn=Jobs()).completed == 6


@pytest.mark.slow
def test_a_real_study_whose_disk_fills_resumes_to_the_uninterrupted_numbers(reference, numbers, tmp_path,
                                                                            monkeypatch, cli_error):
    """The tiny study, trained: the disk fills before the third outcome is stored; after the one line, the
    same command (space freed) finishes it with the reference's losses, curves and batch streams."""
    folder = tmp_path / "s"
    disk = Disk(monkeypatch)
    disk.fill_at_record(monkeypatch, 3)
    line = cli_error(["study", "run", str(reference.spec), "--dir", str(folder), "--json"])
    assert line.startswith(f"depthwidth study: error: {folder / STORE_FILE}: cannot write the study store "
                           f"({NO_SPACE}); nothing stored in it is lost")
    with Store.open(folder) as store:
        assert 2 <= store.counts()["completed"] < 6  # the disk filled mid-study
    disk.full = False
    monkeypatch.undo()
    assert main(["study", "run", str(reference.spec), "--dir", str(folder), "--json"]) == 0
    assert numbers(folder) == numbers(reference.dir)


STAND_IN = """\
import functools, json, sys
sys.path.insert(0, {tests!r})
from test_full_disk import Jobs, _stored
import depthwidth.study
from depthwidth.cli import main
if sys.argv[1] == "stored":
    print(json.dumps(_stored(sys.argv[2])))
    sys.exit(0)
depthwidth.study.run_study = functools.partial(depthwidth.study.run_study, job_fn=Jobs())
sys.exit(main(sys.argv[1:]))
"""
#: in a mount namespace: a tmpfs too small for the study, the study run on it, its status, the tmpfs grown
#: (space freed), the same command again, and what the store holds
TMPFS_SCRIPT = """\
mount -t tmpfs -o size=240k tmpfs {mount} || exit 99
{py} {stand_in} study run {spec} --dir {mount}/s --json > /dev/null 2> {out}/first.err; echo $? > {out}/first.rc
{py} {stand_in} study status {mount}/s --json > {out}/status.json; echo $? > {out}/status.rc
mount -o remount,size=16m {mount} || exit 98
{py} {stand_in} study run {spec} --dir {mount}/s --json > /dev/null; echo $? > {out}/again.rc
{py} {stand_in} stored {mount}/s > {out}/stored.json
"""


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _namespaces(), reason="no mount namespace here (unshare -rm) to mount a small tmpfs in")
def test_a_small_tmpfs_that_fills_mid_study(spec, uninterrupted, tmp_path):
    mount, out = tmp_path / "mnt", tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN.format(tests=str(Path(__file__).parent)))
    script = TMPFS_SCRIPT.format(mount=mount, py=sys.executable, stand_in=stand_in, spec=spec, out=out)
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if done.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    store_file = mount / "s" / STORE_FILE
    assert (out / "first.rc").read_text().strip() == "2"
    assert (out / "first.err").read_text() == (
        f"depthwidth study: error: {store_file}: cannot write the study store ({NO_SPACE}); nothing stored in it "
        "is lost: free some space, then run the same command again\n")
    assert (out / "status.rc").read_text().strip() == "0"
    counts = json.loads((out / "status.json").read_text())["counts"]
    assert 1 <= counts["completed"] < 6 and counts["interrupted"] == 1
    assert (out / "again.rc").read_text().strip() == "0"
    assert json.loads((out / "stored.json").read_text()) == json.loads(json.dumps(_stored(uninterrupted)))
