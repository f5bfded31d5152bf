"""A run with horizons killed with SIGKILL at any moment of its life (in the run itself before, between and
after its branch points, after its final checkpoint, in each cooldown branch, after the branches' results
and before its own) and resumed records exactly what the uninterrupted run records: result.json, its curve,
evaluations and horizons, and every branch's result.json, field by field except timings; what was recorded
before the kill is never done or written again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from depthwidth.artifact.folder import CHECKPOINT, RESULT
from depthwidth.artifact.schedule import branch_config, cooldown_start
from depthwidth.train import train
from depthwidth.train.horizons import branch_dir

HORIZONS = (0.25, 0.5)  # and the run itself, 1.0

#: fields of a result that are measurements of time (or of the process), not of the run's numbers
TIMINGS = {"train_seconds", "eval_seconds", "tokens_per_s", "achieved_flops_per_s", "mfu", "mfu_vendor",
           "peak_rss_bytes"}
#: per curve point: the step's measured seconds, and the marks of the first steps a process times alone
CURVE_TIMINGS = {"seconds", "cpu_seconds", "tokens_per_s", "warmup"}

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import depthwidth.train.loop as loop
    from depthwidth.shapes import Shape
    from depthwidth.train import TrainConfig, train
    shape = Shape.from_dict(json.loads(sys.argv[1]))
    config = TrainConfig.from_dict(json.loads(sys.argv[2]))
    out, phase, steps, step = Path(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])

    def park():
        print("parked", flush=True)
        time.sleep(120)  # until the parent kills us

    def progress(p):
        if p.phase == phase and p.steps == steps and p.step >= step:
            park()

    real_write = loop.write_json

    def write_json(path, data, **kw):  # "result": parked just before the run's own result.json
        if phase == "result" and Path(path) == out / "result.json":
            park()
        return real_write(path, data, **kw)

    loop.write_json = write_json
    train(shape, config, out_dir=out, progress=progress)
    print("finished", flush=True)
    """
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from conftest import make_text
    from depthwidth.shapes import Shape
    from depthwidth.train import TrainConfig

    root = tmp_path_factory.mktemp("horizon-resume")
    corpus = root / "corpus.txt"
    corpus.write_text(make_text())
    shape = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
    config = TrainConfig(corpus=str(corpus), seq_len=32, batch_size=4, steps=32, threads=1, eval_windows=8,
                         cache_dir=str(root / "cache"), peak_flops=1e11, schedule="wsd", decay_fraction=0.25,
                         warmup=2, lr=3e-3, eval_every=4, checkpoint_every=4, dropout=0.1,
                         horizons=[*HORIZONS, 1.0])
    train(shape, config, out_dir=root / "through")
    return shape, config, root / "through"


def _starts(config) -> list[int]:
    return [cooldown_start(branch_config(config, h)) for h in HORIZONS]


def test_the_kill_moments_cover_the_branch_points(setup):
    _, config, _ = setup
    assert _starts(config) == [6, 12] and [branch_config(config, h).steps for h in HORIZONS] == [8, 16]


#: (where the child is parked when it is killed: progress phase, that run's steps, from which step)
MOMENTS = {
    "run, before the first branch point": ("train", 32, 5),
    "run, between the branch points": ("train", 32, 9),
    "run, in its cooldown after both branch points": ("train", 32, 29),
    "after the run's final checkpoint, before its branches": ("done", 32, 0),
    "in the 0.25 branch": ("train", 8, 7),
    "in the 0.5 branch": ("train", 16, 14),
    "after the last branch's final checkpoint, before its result": ("done", 16, 0),
    "after every branch's result, before the run's own": ("result", 0, 0),
}


def _kill(shape, config, out: Path, phase: str, steps: int, step: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, json.dumps(shape.to_dict()), json.dumps(config.to_dict()), str(out), phase,
         str(steps), str(step)], stdout=subprocess.PIPE, text=True)
    try:
        for line in child.stdout:
            if line.strip() == "parked":
                break
        else:
            raise AssertionError(f"the child ended before the kill moment (status {child.wait()})")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL


def _record(path: Path) -> dict:
    """A result.json without its timings (curve points and horizon entries included)."""
    data = json.loads(path.read_text())
    out = {k: v for k, v in data.items() if k not in TIMINGS and k != "resumes"}
    out["curve"] = [{k: v for k, v in c.items() if k not in CURVE_TIMINGS} for c in data["curve"]]
    out["horizons"] = [{k: v for k, v in h.items() if k not in TIMINGS} for h in data.get("horizons") or []]
    return out


def _records(run: Path) -> dict[str, dict]:
    return {"run": _record(run / RESULT)} | {f"branch {h:g}": _record(branch_dir(run, h) / RESULT)
                                             for h in HORIZONS}


def _results(run: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in [run / RESULT, *(branch_dir(run, h) / RESULT for h in HORIZONS)]
            if p.is_file()}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_run_with_horizons_killed_then_resumed_records_what_the_uninterrupted_run_does(setup, tmp_path,
                                                                                          moment):
    shape, config, through = setup
    run = tmp_path / "killed"
    _kill(shape, config, run, *MOMENTS[moment])
    assert not (run / RESULT).exists()
    written = _results(run)  # the branches finished before the kill
    resumed = train(shape, config, out_dir=run, resume=True)
    assert resumed.status == "completed"
    expected, got = _records(through), _records(run)
    for name in expected:  # field by field, so that a failure names the field
        for key in expected[name]:
            assert got[name][key] == expected[name][key], f"{moment}: {name}: {key}"
        assert got[name].keys() == expected[name].keys(), f"{moment}: {name}"
    assert [e["step"] for e in got["run"]["evals"]] == [4, 8, 12, 16, 20, 24, 28, 32]
    for path, data in written.items():  # never written again
        assert path.read_bytes() == data, f"{moment}: {path} was rewritten"
    notes = json.loads((run / RESULT).read_text())["resumes"]
    if MOMENTS[moment][0] == "train" and MOMENTS[moment][1] == 32:
        assert notes and notes[-1].startswith("resumed at step"), notes
    assert train(shape, config, out_dir=run, resume=True).to_dict() == json.loads((run / RESULT).read_text())


def test_a_result_deleted_after_a_run_with_horizons_is_rebuilt_without_a_second_evaluation(setup, tmp_path):
    """The run's last checkpoint keeps what its final evaluation measured: resumed from there it
    evaluates nothing again (the same evaluation steps, the same recorded seconds)."""
    shape, config, through = setup
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(through, run)
    before = json.loads((run / RESULT).read_text())
    checkpoint = (run / CHECKPOINT).read_bytes()
    (run / RESULT).unlink()
    again = train(shape, config, out_dir=run, resume=True)
    assert [e["step"] for e in again.evals] == [e["step"] for e in before["evals"]]
    assert again.eval_seconds == before["eval_seconds"] and again.val_loss == before["val_loss"]
    assert again.val_loss_by_position == before["val_loss_by_position"]
    assert again.horizons == before["horizons"]
    assert (run / CHECKPOINT).read_bytes() == checkpoint  # not saved again


def test_a_run_started_again_before_its_branch_points_leaves_finished_branches_as_they_are(setup, tmp_path):
    """Both of the run's checkpoints unreadable: it trains again from step 0 past its branch points, and the
    branches it finished before keep their folders byte for byte (nothing branched or trained twice)."""
    import shutil

    shape, config, through = setup
    run = tmp_path / "copy"
    shutil.copytree(through, run)
    branches = {p: p.read_bytes() for h in HORIZONS for p in sorted(branch_dir(run, h).iterdir()) if p.is_file()}
    assert {p.name for p in branches} >= {CHECKPOINT, RESULT}
    (run / RESULT).unlink()
    for name in (CHECKPOINT, "checkpoint.prev.pt"):
        (run / name).write_bytes(b"torn")
    again = train(shape, config, out_dir=run, resume=True)
    assert again.resumes and again.resumes[-1].startswith("started again at step 0")
    assert _records(run) == _records(through)
    for path, data in branches.items():
        assert path.read_bytes() == data, f"{path} was rewritten"
