"""Live progress displays on stderr: a running study (its runs and the current run's steps), one
training run (step, loss, tokens/s, ETA) and a measurement that reports (label, done, total). Both draw nothing when disabled or when rich has no
terminal to draw on, and leave no trace when they finish (transient bars)."""

from __future__ import annotations

from depthwidth.present.units import clock, number, or_dash


def _bar(*columns):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from depthwidth.present.terminal import console

    err = console(stderr=True)  # off without a terminal: a pipe or a log gets no stray line break
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), *columns,
                    TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)


class StudyProgress:
    """Live display of a running study: the study's runs and the current run's steps. Call it with each
    `StudyEvent` of `run_study(on_event=...)`."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar = None

    def __enter__(self) -> StudyProgress:
        if self.enabled:
            from rich.progress import TextColumn

            self._bar = _bar(TextColumn("{task.fields[info]}"))
            self._bar.__enter__()
            self._study = self._bar.add_task("study", total=None, info="")
            self._run = self._bar.add_task("run", total=None, info="")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def __call__(self, event) -> None:
        bar = self._bar
        if bar is None:
            return
        if event.kind == "start":
            bar.update(self._study, total=event.total, completed=event.done, info=f"{event.todo} to run")
            bar.console.print(f"executor: {event.note}", markup=False)
        elif event.kind == "run_start":
            bar.update(self._run, description=event.label, completed=0, total=None,
                       info=f"attempt {event.attempt}" if event.attempt > 1 else "")
        elif event.kind == "run_progress" and event.progress:
            p = event.progress
            bar.update(self._run, completed=p.get("step", 0), total=p.get("steps"), info=_step_info(p))
        elif event.kind == "run_end":
            bar.update(self._study, completed=event.done)
            text = f"{event.status:9s} {event.label} ({event.seconds:.1f} s)"
            bar.console.print(text + (f": {event.error}" if event.error else ""), markup=False)
        elif event.kind == "retry":
            bar.console.print(f"retrying  {event.label} after attempt {event.attempt}: {event.error}", markup=False)


def _step_info(p: dict) -> str:
    """'loss 2.345 12,345 tok/s eta 0:01:05' from a run's progress record, else its phase."""
    parts = (f"loss {p['loss']:.3f}" if p.get("loss") is not None else "",
             f"{number(p['tokens_per_s'])} tok/s" if p.get("tokens_per_s") else "",
             f"eta {clock(p['eta_s'])}" if p.get("eta_s") is not None else "")
    return " ".join(x for x in parts if x) or str(p.get("phase", ""))


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
