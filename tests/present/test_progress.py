"""The study display: plain lines off a terminal (throttled by an injected clock), the live block on a
terminal (one line per run in flight, none for a finished run), and the ETA's arithmetic."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from depthwidth.present.progress import StudyProgress
from depthwidth.study.eta import study_eta
from depthwidth.study.runner import StudyEvent


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _plain() -> tuple[StudyProgress, StringIO, Clock]:
    out, clock = StringIO(), Clock()
    display = StudyProgress(enabled=True, console=Console(file=out, width=200), clock=clock, every=10)
    return display, out, clock


def test_plain_lines_are_throttled_and_failures_are_printed():
    display, out, clock = _plain()
    events = [  # (time, event)
        (100, StudyEvent(kind="start", total=4, done=0, todo=4, workers=2, note="local, 2 workers",
                         predicted_s={"a": 10.0, "b": 10.0, "c": 20.0, "d": None})),
        (101, StudyEvent(kind="run_start", run_id="a", label="A", attempt=1)),
        (101, StudyEvent(kind="run_start", run_id="b", label="B", attempt=1)),
        (105, StudyEvent(kind="run_progress", run_id="a", progress={"phase": "train", "step": 5, "steps": 10,
                                                                   "loss": 3.0, "tokens_per_s": 900.0})),
        (115, StudyEvent(kind="run_end", run_id="a", label="A", status="completed", total=4, done=1, seconds=15.0)),
        (118, StudyEvent(kind="run_end", run_id="b", label="B", status="failed", total=4, done=2, seconds=2.0,
                         error="RuntimeError: boom")),
        (119, StudyEvent(kind="run_start", run_id="c", label="C", attempt=1)),
        (125, StudyEvent(kind="run_progress", run_id="c", progress={"phase": "train", "step": 1, "steps": 4})),
        (129, StudyEvent(kind="run_progress", run_id="c", progress={"phase": "train", "step": 2, "steps": 4})),
        (130, StudyEvent(kind="retry", run_id="d", label="D", attempt=1, error="OSError: x")),
        (135, StudyEvent(kind="run_progress", run_id="c", progress={"phase": "train", "step": 3, "steps": 4})),
        (200, StudyEvent(kind="done", total=4, done=4)),
    ]
    with display:
        for t, event in events:
            clock.t = t
            display(event)
    assert out.getvalue().splitlines() == [
        "executor: local, 2 workers",
        # a: 15 s measured for 10 predicted (scale 1.5); b 10 x 1.5, c 20 x 1.5, d the mean measured 15: 60 / 2
        "study: 1/4 runs done, 0:00:15 elapsed, about 0:00:30 left",
        "failed    B (2.0 s): RuntimeError: boom",
        # c half done: 20 x 0.5 x 1.5 = 15, d 15; 30 s over 2 workers (b failed: not left)
        "study: 2/4 runs done, 0:00:29 elapsed, about 0:00:15 left",
        "retrying  D after attempt 1: OSError: x",
        "study: 4/4 runs done, 0:01:40 elapsed",
    ]
    assert "\x1b" not in out.getvalue()


def test_a_disabled_display_prints_nothing():
    out = StringIO()
    with StudyProgress(enabled=False, console=Console(file=out)) as display:
        display(StudyEvent(kind="start", total=1, todo=1, note="x"))
        display(StudyEvent(kind="run_end", run_id="a", label="A", status="failed", total=1, done=1, error="e"))
    assert out.getvalue() == ""


def test_terminal_shows_runs_in_flight_and_no_line_for_a_finished_run():
    out, clock = StringIO(), Clock()
    console = Console(file=out, force_terminal=True, width=120)
    display = StudyProgress(enabled=True, console=console, clock=clock, refresh_per_second=0)
    with display:
        display(StudyEvent(kind="start", total=3, todo=3, workers=2, note="local",
                           predicted_s={"a": 10.0, "b": 10.0, "c": 10.0}))
        display(StudyEvent(kind="run_start", run_id="a", label="L2-H64-A8 lr=0.002 seed=0", attempt=1))
        display(StudyEvent(kind="run_start", run_id="b", label="L1-H96-A12 lr=0.004 seed=1", attempt=1))
        display(StudyEvent(kind="run_progress", run_id="a", progress={
            "phase": "train", "step": 3, "steps": 10, "loss": 2.5, "tokens_per_s": 12345.0, "eta_s": 7.0}))
        clock.t = 112
        display(StudyEvent(kind="run_end", run_id="b", label="L1-H96-A12 lr=0.004 seed=1", status="completed",
                           total=3, done=1, seconds=12.0))
        assert display.run_lines() == ["L2-H64-A8 lr=0.002 seed=0  step 3/10  loss 2.500  12,345 tok/s"]
        # a: 10 x 0.7 x 1.2, c: 10 x 1.2 -> 20.4 s over 2 workers
        assert display.study_line() == "study: 1/3 runs done, 0:00:12 elapsed, about 0:00:10 left"
        display.refresh()
        drawn = out.getvalue()
        assert "L2-H64-A8 lr=0.002 seed=0" in drawn and "step 3/10" in drawn and "loss 2.500" in drawn
        assert "1/3 runs done" in drawn
        assert "L1-H96" not in drawn and "completed" not in drawn  # the finished run left no line
        display(StudyEvent(kind="run_end", run_id="a", label="L2-H64-A8 lr=0.002 seed=0", status="failed",
                           total=3, done=2, seconds=1.0, error="RuntimeError: boom"))
    assert "failed    L2-H64-A8 lr=0.002 seed=0 (1.0 s): RuntimeError: boom" in out.getvalue()
    assert display.run_lines() == []


def test_eta_scales_the_predictions_by_what_the_finished_runs_took():
    # two finished runs took 30 s for 20 predicted: scale 1.5; left 10 + 30 predicted -> 60 s on 2 workers
    assert study_eta(left={"c": 10.0, "d": 30.0}, finished=[(5.0, 10.0), (15.0, 20.0)], workers=2) == 30.0
    # before any run has finished: the prediction as it is
    assert study_eta(left={"c": 10.0, "d": 30.0}, finished=[], workers=4) == 20.0  # 2 runs: 2 workers used
    # a run in flight counts for what it has left
    assert study_eta(left={"c": 10.0}, finished=[], workers=1, done_fraction={"c": 0.25}) == 7.5
    # a branch (0 predicted, 0 measured) changes nothing
    assert study_eta(left={"c": 10.0}, finished=[(10.0, 20.0), (0.0, 0.0)], workers=1) == 20.0


def test_eta_without_predictions_uses_the_mean_measured_run():
    # no profile: mean measured 12 s per run x 3 runs left (one proposed later), over 3 workers
    assert study_eta(left={"c": None, "d": None}, finished=[(None, 10.0), (None, 14.0)], workers=3,
                     unknown_left=1) == 12.0
    # a run without a prediction among predicted ones: the mean of those without one, else of all
    assert study_eta(left={"b": None, "c": 4.0}, finished=[(2.0, 4.0), (None, 1.0)], workers=1) == 9.0
    assert study_eta(left={"b": None}, finished=[(2.0, 4.0)], workers=1) == 4.0
    assert study_eta(left={"b": None}, finished=[], workers=1) is None  # nothing to go on yet
    assert study_eta(left={}, finished=[], workers=1) == 0.0
    # a trial proposed after the start, before any run has finished: the mean prediction
    assert study_eta(left={"a": 10.0, "b": 30.0}, finished=[], workers=1, unknown_left=1) == 60.0


def test_runs_predicted_zero_take_no_part():
    # a benchmark or a branch (0): neither time nor a worker; the one training run left has both workers' share
    assert study_eta(left={"a": 10.0, "x": 0.0, "y": 0.0}, finished=[(0.0, 0.05)], workers=2) == 10.0


def test_study_line_says_when_the_time_left_is_unknown():
    display, out, clock = _plain()
    with display:
        display(StudyEvent(kind="start", total=2, todo=2, workers=1, note="n", predicted_s={"a": None, "b": None}))
        clock.t = 161
        assert display.study_line() == "study: 0/2 runs done, 0:01:01 elapsed, time left unknown"


def test_predictions_of_the_demo_runs(tmp_path, monkeypatch):
    from depthwidth.study.demo import demo_spec
    from depthwidth.study.eta import predicted_runs
    from depthwidth.study.runner import prepare

    runs = prepare(demo_spec()).runs
    predicted = predicted_runs(runs, hardware="h100", threads=lambda run: 1)
    assert list(predicted) == [r.run_id for r in runs]
    for run in runs:
        p = predicted[run.run_id]
        if run.kind != "train" or run.parent is not None:
            assert p == 0.0  # a benchmark; a branch, trained inside its parent's job
        else:
            assert p > 0
    # no profile of this machine (an empty cache: the suite's shared one may hold a profile by now): no
    # prediction, the ETA falls back
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "empty-cache"))
    assert set(predicted_runs(runs, hardware="measured", threads=lambda run: 1).values()) <= {None, 0.0}
