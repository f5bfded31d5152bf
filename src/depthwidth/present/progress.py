"""Progress displays on stderr: a running study (the study's runs, done and left, and each run in flight),
one training run (step, loss, tokens/s, ETA) and a measurement that reports (label, done, total). The
bars draw nothing when disabled or when rich has no terminal to draw on, and leave no trace when they
finish (transient); a study without a terminal gets a few plain lines instead."""

from __future__ import annotations

import time
from collections.abc import Callable

from depthwidth.present.units import clock, number, or_dash


def _bar(*columns):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from depthwidth.present.terminal import console

    err = console(stderr=True)  # off without a terminal: a pipe or a log gets no stray line break
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *columns,
                    TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)


#: seconds between two progress lines when stderr is not a terminal (a log, a pipe)
PLAIN_EVERY = 10.0


class StudyProgress:
    """Display of a running study; call it with each `StudyEvent` of `run_study(on_event=...)`.

    On a terminal: a live block on stderr, one line for the study (runs done of the total, elapsed, the
    ETA of `study.eta.study_eta`) and one per run in flight (label, step/steps, last loss, tok/s); a
    finished run leaves no line, a failed run or a retry prints one, with its error. Elsewhere: plain
    lines, at most one progress line every `every` seconds plus one per failure or retry, and a last one
    when the study ends. `console` (default: stderr's) and `clock` are injectable."""

    def __init__(self, *, enabled: bool, console=None, clock: Callable[[], float] = time.monotonic,
                 every: float = PLAIN_EVERY, refresh_per_second: float = 4) -> None:
        self.enabled, self.clock, self.every = enabled, clock, every
        self._console, self._refresh = console, refresh_per_second
        self._live = None
        self.total = self.done = 0
        self.workers = 1
        self.predicted: dict[str, float | None] = {}
        self.finished: dict[str, tuple[float | None, float]] = {}  # run id -> (predicted, measured seconds)
        self.failed: set[str] = set()
        self.active: dict[str, dict] = {}  # run id -> label, step, steps, loss, tokens_per_s, phase
        self._started = self._printed = None

    @property
    def terminal(self) -> bool:
        return self._console is not None and self._console.is_terminal

    def __enter__(self) -> StudyProgress:
        if not self.enabled:
            return self
        if self._console is None:
            from depthwidth.present.terminal import console

            self._console = console(stderr=True)
        self._started = self._printed = self.clock()
        if self.terminal:
            from rich.live import Live

            self._live = Live(self._render(), console=self._console, transient=True, auto_refresh=self._refresh > 0,
                              refresh_per_second=self._refresh or 4, redirect_stdout=False, redirect_stderr=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def __call__(self, event) -> None:
        if not self.enabled or self._console is None:
            return
        kind = event.kind
        if kind == "start":
            self.total, self.done, self.workers = event.total, event.done, max(1, event.workers)
            self.predicted = dict(event.predicted_s)
            self._print(f"executor: {event.note}")
        elif kind == "run_start":
            self.active[event.run_id] = {"label": event.label, "step": None, "steps": None, "loss": None,
                                         "tokens_per_s": None, "phase": ""}
        elif kind == "run_progress" and event.progress and event.run_id in self.active:
            run, p = self.active[event.run_id], event.progress
            run.update({k: p[k] for k in ("step", "steps", "loss", "tokens_per_s") if p.get(k) is not None})
            run["phase"] = str(p.get("phase") or "")
        elif kind == "run_end":
            self.active.pop(event.run_id, None)
            self.total, self.done = max(self.total, event.total), event.done
            if event.status == "failed":
                self.failed.add(event.run_id)
                self._print(f"failed    {event.label} ({event.seconds:.1f} s): {event.error}")
            else:
                self.finished[event.run_id] = (self.predicted.get(event.run_id), event.seconds)
        elif kind == "retry":
            self.active.pop(event.run_id, None)
            self._print(f"retrying  {event.label} after attempt {event.attempt}: {event.error}")
        elif kind == "done":
            self.total, self.done = event.total, event.done
            if not self.terminal:
                self._print(f"study: {self.done}/{self.total} runs done, {clock(self.elapsed())} elapsed")
            return
        if self._live is not None:
            self._live.update(self._render())
        elif self.clock() - self._printed >= self.every:
            self._print(self.study_line())

    def refresh(self) -> None:
        """Draw the live block now (a terminal only)."""
        if self._live is not None:
            self._live.update(self._render(), refresh=True)

    # ---- what is shown ---------------------------------------------------------------------------
    def elapsed(self) -> float:
        return 0.0 if self._started is None else self.clock() - self._started

    def eta(self) -> float | None:
        """Seconds the study still takes (`study.eta.study_eta` over what the events said)."""
        from depthwidth.study.eta import study_eta

        left = {k: p for k, p in self.predicted.items() if k not in self.finished and k not in self.failed}
        fractions = {k: r["step"] / r["steps"] for k, r in self.active.items()
                     if r["step"] is not None and r["steps"] and r["phase"] != "eval"}
        unknown = max(0, self.total - self.done - len(left))
        return study_eta(left=left, finished=self.finished.values(), workers=self.workers, unknown_left=unknown,
                         done_fraction=fractions)

    def study_line(self) -> str:
        """'study: 37/140 runs done, 0:01:02 elapsed, about 0:01:40 left'."""
        eta = self.eta() if self.done < self.total else 0.0
        left = "time left unknown" if eta is None else f"about {clock(eta)} left"
        return f"study: {self.done}/{self.total} runs done, {clock(self.elapsed())} elapsed, {left}"

    def run_lines(self) -> list[str]:
        """One line per run in flight: label, step/steps, last loss, tok/s (else its phase)."""
        return [_run_line(r) for r in self.active.values()]

    def _render(self):
        from rich.text import Text

        return Text("\n".join([self.study_line(), *("  " + line for line in self.run_lines())]), no_wrap=True,
                    overflow="ellipsis")

    def _print(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self._console.file.write(line + "\n")
            self._console.file.flush()
            self._printed = self.clock()


def _run_line(r: dict) -> str:
    """'L2-H64-A8 lr=0.002 seed=0  step 120/400  loss 2.345  12,345 tok/s'."""
    parts = [r["label"]]
    if r["step"] is not None:
        parts.append(f"step {r['step']}/{r['steps']}" if r["steps"] else f"step {r['step']}")
    if r["loss"] is not None:
        parts.append(f"loss {r['loss']:.3f}")
    if r["tokens_per_s"]:
        parts.append(f"{number(r['tokens_per_s'])} tok/s")
    if r["phase"] not in ("", "train", "eval", "done") and r["loss"] is None:
        parts.append(r["phase"])
    return "  ".join(parts)


class TaskProgress:
    """One bar for a measurement that calls `progress(label, done, total)`; the context value is that
    callback (None when disabled)."""

    def __init__(self, description: str, *, enabled: bool = True) -> None:
        self.description, self.enabled = description, enabled
        self._bar = None

    def __enter__(self):
        if not self.enabled:
            return None
        self._bar = _bar()
        self._bar.__enter__()
        task = self._bar.add_task(self.description, total=None)

        def progress(label: str, done: int, total: int) -> None:
            self._bar.update(task, description=label, completed=done, total=total)

        return progress

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


class TrainProgressBar:
    """One training run's bar (step, loss, tokens/s, ETA) for `train(..., progress=...)`; evaluations
    are printed above it. The context value is the callback (None when disabled)."""

    def __init__(self, *, enabled: bool, steps: int) -> None:
        self.enabled, self.steps = enabled, steps
        self._bar = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.progress import TextColumn

        self._bar = _bar(TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"),
                         TextColumn("ETA {task.fields[eta]}"))
        self._bar.__enter__()
        self._task = self._bar.add_task("train", total=self.steps, loss="-", tps="-", eta="-")
        return self._update

    def _update(self, p) -> None:
        if p.phase == "train":
            self._bar.update(self._task, completed=p.step, loss=f"{p.loss:.4f}", tps=f"{p.tokens_per_s:,.0f}",
                             eta=or_dash(p.eta_s, clock))
        elif p.phase == "eval":
            self._bar.console.print(f"step {p.step}: val loss {p.val_loss:.4f}")

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


__all__ = ["StudyProgress", "TaskProgress", "TrainProgressBar"]
