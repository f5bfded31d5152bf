"""How long a study has left: each run's predicted seconds, the ETA of the runs to do, and the live
progress record that `study status` reads while a driver runs.

Predicted seconds (`predicted_runs`): a training run's tokens at the step time the analytic core predicts
for its shape on the study's `hardware` (`study.timebudget.predicted_seconds`: eager execution, the run's
batch geometry and dtype) - a table row, or "measured": this machine's profile of the run's thread count,
resolved once per thread count. A cooldown branch (`study.horizons`) is trained inside its parent's job and
recorded with the parent's outcome, so its own prediction is 0 and the parent's covers the job; a benchmark
is counted as 0 too (a fraction of a second to a minute, beside minutes of training). A training run maps to
None when this machine has no profile for "measured".

The ETA (`study_eta`) of the runs left, in wall seconds (a run predicted 0 takes no part in it):
    predicted        each run left with a prediction p counts  p x (1 - f) x scale,  scale = sum(measured) /
                     sum(predicted) over the finished runs with a prediction (1 before one has finished);
    not predicted    each run left without one (no profile, or a trial an LR search proposed after the start)
                     counts  e x (1 - f),  e = the mean measured seconds of the finished runs without a
                     prediction, else of those with one, else the mean prediction x scale;
    ETA              the sum / min(workers, runs left),
where f is the fraction of its steps a run in flight has done (0 for one not started). None when a run without
a prediction is left and there is nothing to estimate it from. Failed runs take no part in the means.

The live record (`LiveRecord`, `read_live`): the driver keeps `<study>/live.json` with the last step,
steps, loss, tokens/s and ETA of each run in flight (rewritten atomically, at most every `LIVE_EVERY` s,
removed when the study ends); `running_runs` turns it - or, for a run it does not hold, the last stored
curve point and the run's configured steps - into the rows `study status` shows.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import write_json

LIVE_FILE = "live.json"
LIVE_EVERY = 2.0  # seconds between two rewrites of the live record


# ---- predictions ---------------------------------------------------------------------------------
def predicted_runs(runs: Iterable, *, hardware: str, threads: Callable[[object], int]) -> dict[str, float | None]:
    """run id -> predicted training seconds of each `study.expand.Run` (module docstring); None where there
    is no prediction. `threads(run)` is the run's torch thread count (which measured profile applies)."""
    from depthwidth.machine import MEASURED, resolve_hardware
    from depthwidth.study.run_config import train_config_of
    from depthwidth.study.timebudget import predicted_seconds

    specs: dict[int | None, object] = {}

    def hardware_for(run):
        key = threads(run) if hardware == MEASURED else None
        if key not in specs:
            try:
                specs[key] = resolve_hardware(hardware, argument="hardware", threads=key)
            except (UserError, OSError):  # no profile of this machine: the ETA falls back on measured times
                specs[key] = None
        return specs[key]

    out: dict[str, float | None] = {}
    for run in runs:
        if run.kind != "train" or run.parent is not None:
            out[run.run_id] = 0.0
        else:
            hw = hardware_for(run)
            if hw is None:
                out[run.run_id] = None
                continue
            config = train_config_of(run.config)
            out[run.run_id] = predicted_seconds(run.shape, hardware=hw, tokens=config.total_steps * config.tokens_per_step,
                                                seq_len=config.seq_len, batch_size=config.batch_size,
                                                dtype=config.dtype)
    return out


# ---- the ETA -------------------------------------------------------------------------------------
def study_eta(*, left: Mapping[str, float | None], finished: Iterable[tuple[float | None, float]],
              workers: int, unknown_left: int = 0, done_fraction: Mapping[str, float] | None = None) -> float | None:
    """Wall seconds the runs `left` (run id -> predicted seconds or None) still take (module docstring).
    `finished`: (predicted or None, measured seconds) of each run finished so far (failed ones left out);
    `unknown_left`: runs left that `left` does not name (proposed later: no prediction); `done_fraction`:
    run id -> the fraction of its steps a run in flight has done."""
    finished = list(finished)
    done_fraction = done_fraction or {}
    timed = [(p, m) for p, m in finished if p is None or p > 0]  # a 0 (a branch, a benchmark) is counted elsewhere
    with_p = [(p, m) for p, m in timed if p is not None]
    scale = sum(m for _, m in with_p) / sum(p for p, _ in with_p) if with_p else 1.0
    prior = [p for p in left.values() if p] or [p for p, _ in with_p]
    without = [m for p, m in timed if p is None] or [m for _, m in with_p]
    each = (sum(without) / len(without) if without else
            sum(prior) / len(prior) * scale if prior else None)  # a run left without a prediction
    total, n_left = 0.0, unknown_left
    for run_id, p in left.items():
        if p == 0:
            continue
        n_left += 1
        rest = 1.0 - min(1.0, max(0.0, done_fraction.get(run_id, 0.0)))
        if p is None and each is None:
            return None
        total += (p * scale if p is not None else each) * rest
    if unknown_left:
        if each is None:
            return None
        total += each * unknown_left
    return total / max(1, min(workers, n_left))


# ---- the live record -----------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class RunningRun:
    """One run in flight as `study status` shows it."""

    run_id: str
    label: str
    step: int | None
    steps: int | None
    eta_s: float | None
    source: str  # "live" (the driver's live record) or "curve" (the last stored curve point)

    def to_dict(self) -> dict:
        return asdict(self)


class LiveRecord:
    """An event callback (`runner.StudyEvent`) that keeps `<folder>/live.json` for `study status`, then
    hands each event on to `then`. `clock` is injectable for tests."""

    def __init__(self, folder: str | os.PathLike, then: Callable | None = None, *,
                 clock: Callable[[], float] = time.monotonic, every: float | None = None) -> None:
        self.path = Path(folder) / LIVE_FILE
        self.then, self.clock = then, clock
        self.every = LIVE_EVERY if every is None else every
        self.runs: dict[str, dict] = {}
        self._written: float | None = None

    def __call__(self, event) -> None:
        try:
            self._record(event)
        except OSError:
            pass  # the record is a convenience for readers: a full disk must not stop the study here
        if self.then is not None:
            self.then(event)

    def _record(self, event) -> None:
        if event.kind == "start":
            self.runs.clear()
            self._write()
        elif event.kind == "run_start":
            self.runs[event.run_id] = {"label": event.label, "step": None, "steps": None, "eta_s": None}
            self._write(throttled=True)
        elif event.kind == "run_progress" and event.progress and event.run_id in self.runs:
            p = event.progress
            # an evaluation's record has no loss, rate or ETA: the last ones stay
            self.runs[event.run_id].update({k: p[k] for k in ("step", "steps", "loss", "tokens_per_s", "eta_s")
                                            if p.get(k) is not None}, at=time.time())
            self._write(throttled=True)
        elif event.kind in ("run_end", "retry"):
            if self.runs.pop(event.run_id, None) is not None:
                self._write(throttled=True)
        elif event.kind == "done":
            self.runs.clear()
            self.path.unlink(missing_ok=True)

    def _write(self, *, throttled: bool = False) -> None:
        now = self.clock()
        if throttled and self._written is not None and now - self._written < self.every:
            return
        write_json(self.path, {"written_at": time.time(), "runs": self.runs})
        self._written = now


def read_live(folder: str | os.PathLike) -> dict[str, dict]:
    """run id -> its live entry (step, steps, loss, tokens_per_s, eta_s), {} when there is no readable record."""
    try:
        data = json.loads((Path(folder) / LIVE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    runs = data.get("runs") if isinstance(data, dict) else None
    return {k: v for k, v in runs.items() if isinstance(v, dict)} if isinstance(runs, dict) else {}


def running_runs(store, *, live: Mapping[str, dict] | None = None) -> list[RunningRun]:
    """The rows of the store's running runs (of the current spec): step, steps and ETA from the `live`
    record (`read_live`), else the last stored curve point, the run's configured steps and, when that
    point has tokens/s, the ETA of the steps left at that rate."""
    from depthwidth.study.run_config import train_config_of

    live = live or {}
    out = []
    for run in store.runs(status="running"):
        label = run.shape_label + (f" lr={run.lr:.3g} seed={run.seed}" if run.kind == "train" else " bench")
        entry = live.get(run.run_id)
        if entry is not None:
            out.append(RunningRun(run_id=run.run_id, label=label, step=_int(entry.get("step")),
                                  steps=_int(entry.get("steps")), eta_s=_float(entry.get("eta_s")), source="live"))
            continue
        step = steps = eta = None
        if run.kind == "train":
            try:
                config = train_config_of(run.config)
            except (UserError, TypeError, KeyError, ValueError):
                config = None
            steps = None if config is None else config.total_steps
            curve = store.curves(run.run_id)
            if curve:
                step = curve[-1].step
                tps = curve[-1].tokens_per_s
                if config is not None and tps and step is not None:
                    eta = max(0, steps - step) * config.tokens_per_step / tps
        out.append(RunningRun(run_id=run.run_id, label=label, step=step, steps=steps, eta_s=eta, source="curve"))
    return out


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["LIVE_FILE", "LiveRecord", "RunningRun", "predicted_runs", "read_live", "running_runs", "study_eta"]
