"""One run, executed where a worker is: `execute(job) -> Outcome`. Both executors call it (the local one
in the study's process, the Ray one inside a task); it never touches the store and never raises for a
problem of the run itself - an exception becomes a `failed` outcome carrying its message, so the driver
can retry it and record the error.

A training run writes its checkpoints under `<study>/runs/<run id>/`; when a checkpoint is there the
trainer resumes from it (`train(..., resume=True)`), so a study killed in the middle of a run continues
that run instead of starting it again, with the same numbers on CPU.
"""

from __future__ import annotations

import json
import os
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.artifact.folder import RESULT, RUN
from depthwidth.artifact.result import STATUSES
from depthwidth.files import write_text

OUTCOME_STATUSES = STATUSES  # a job ends as its training run does
RUNS_FOLDER = "runs"
#: Progress callback of a running job: (phase, step, steps, loss, tokens_per_s, eta_s).
JobProgress = Callable[..., None]


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """What a worker needs to run one stored run (plain values: it travels to Ray workers)."""

    run_id: str
    kind: str  # "train" | "bench" | "inspect" (`depthwidth.study.inspections`: its config names the settings)
    config: dict = field(repr=False)  # the run's canonical config (see depthwidth.study.run_config)
    run_dir: str  # folder for its checkpoints
    threads: int | None = None  # CPU threads for torch; None keeps the process setting
    execution: dict = field(default_factory=dict)  # TrainConfig execution fields: checkpoint_every, cache_dir, ...
    label: str = ""
    branches: tuple[tuple[float, str], ...] = ()  # (horizon, run id) of each cooldown branch this run trains


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    run_id: str
    status: str  # "completed" | "diverged" | "failed"
    result: dict | None  # TrainResult / BenchResult as a dict, curve removed
    curve: tuple[dict, ...] = ()  # merged training curve: step, tokens, train_loss, val_loss, lr, ...
    error: str | None = None
    wall_seconds: float = 0.0
    worker: str = ""
    branches: tuple[Outcome, ...] = ()  # the outcomes of the job's cooldown branches (`Job.branches`)
    disk_full: str | None = None  # the file a full disk (or quota) refused while the run wrote it

    def __post_init__(self) -> None:
        if self.status not in OUTCOME_STATUSES:
            raise ValueError(f"status={self.status!r} is not allowed; expected one of {', '.join(OUTCOME_STATUSES)}")


def run_dir(study_dir: str | os.PathLike, run_id: str) -> Path:
    return Path(study_dir) / RUNS_FOLDER / run_id[:16]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute(job: Job, *, progress: JobProgress | None = None) -> Outcome:
    """Run one job to its outcome (never raises for the run's own errors)."""
    start = time.perf_counter()
    branched: tuple[Outcome, ...] = ()
    disk_full = None
    try:
        if job.kind == "train":
            status, result, curve, error, branched = _train(job, progress=progress)
        elif job.kind == "bench":
            status, result, curve, error = _bench(job, progress=progress)
        elif job.kind == "inspect":
            status, result, curve, error = _inspect(job)
        else:
            raise ValueError(f"job kind {job.kind!r} is not train, bench or inspect")
    except Exception as exc:  # the run failed; the driver records it and may retry
        status, result, curve = "failed", None, ()
        disk_full = _full_disk_path(exc, job)
        lines = str(exc).strip().splitlines()  # the first line: a kernel's error may add pages of C++ frames
        error = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        tb = traceback.extract_tb(exc.__traceback__)
        if tb:
            error += f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})"
    return Outcome(run_id=job.run_id, status=status, result=result, curve=tuple(curve), error=error,
                   wall_seconds=time.perf_counter() - start, worker=worker_name(), branches=branched,
                   disk_full=disk_full)


def _full_disk_path(exc: BaseException, job: Job) -> str | None:
    """The file a full disk or an exceeded quota refused (ENOSPC, EDQUOT) anywhere in `exc`'s chain, else
    None; the run's folder when the error names no file."""
    import errno

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(exc.filename or job.run_dir)
        if "No space left on device" in str(exc):
            return job.run_dir
        exc = exc.__cause__ or exc.__context__
    return None


def _train(job: Job, *, progress: JobProgress | None) -> tuple[str, dict | None, list[dict], str | None, tuple]:
    from depthwidth.shapes.shape import Shape
    from depthwidth.study.run_config import train_config_of
    from depthwidth.train import train

    shape = Shape.from_dict(job.config["shape"])
    config = train_config_of(job.config, threads=job.threads, **job.execution)
    out = Path(job.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    callback = None
    if progress is not None:
        def callback(p: Any) -> None:
            progress(phase=p.phase, step=p.step, steps=p.steps, loss=p.loss, tokens_per_s=p.tokens_per_s,
                     eta_s=p.eta_s)
    # resume=True: continue from the checkpoint in `out` when there is one, return its result when finished
    done = train(shape, config, out_dir=out, resume=True, progress=callback)
    result = done.to_dict()
    curve = merge_curve(result.pop("curve", []), result.get("evals", []), tokens_per_step=config.tokens_per_step)
    branched = tuple(_branch(job, shape, config, done, fraction=h, run_id=i) for h, i in job.branches)
    return result["status"], result, curve, result.get("error"), branched


def _branch(job: Job, shape, config, parent, *, fraction: float, run_id: str) -> Outcome:
    """The outcome of one cooldown branch of a finished parent run (`depthwidth.study.horizons`): its
    finished result read back from its folder (the trainer trained it after the parent). A parent that
    diverged before the branch's cooldown began leaves no branch to train: the standalone run of that
    length is the same run up to there, so it diverged at the same step."""
    from depthwidth.artifact.schedule import branch_config
    from depthwidth.artifact.folder import CHECKPOINT
    from depthwidth.train import train
    from depthwidth.train.horizons import branch_dir

    start = time.perf_counter()
    branch = branch_config(config, fraction)
    folder = branch_dir(Path(job.run_dir), fraction)
    if parent.status == "diverged" and not (folder / CHECKPOINT).is_file():
        error = (f"diverged: the run it branches from diverged at step {parent.steps}, before this horizon's "
                 "cooldown began")
        return Outcome(run_id=run_id, status="diverged", result={"status": "diverged", "error": error}, error=error,
                       worker=worker_name())
    done = train(shape, branch, out_dir=folder, resume=True).to_dict()
    curve = merge_curve(done.pop("curve", []), done.get("evals", []), tokens_per_step=branch.tokens_per_step)
    return Outcome(run_id=run_id, status=done["status"], result=done, curve=tuple(curve), error=done.get("error"),
                   wall_seconds=time.perf_counter() - start, worker=worker_name())


def merge_curve(curve: list[dict], evals: list[dict], *, tokens_per_step: int) -> list[dict]:
    """One list of points, `step` = optimizer steps done and `tokens` = training tokens seen after it:
    the trainer's per-step curve (its 0-based step i becomes i + 1, its `loss` becomes `train_loss`)
    with each evaluation's validation loss put on the point of the step it followed."""
    points: dict[int, dict] = {}
    for p in curve:
        point = {k: v for k, v in p.items() if k not in ("step", "loss")}
        step = int(p["step"]) + 1
        points[step] = {"step": step, "tokens": step * tokens_per_step, "train_loss": p.get("loss"), **point}
    for e in evals:
        step = int(e["step"])
        point = points.setdefault(step, {"step": step, "tokens": step * tokens_per_step})
        point.update({k: v for k, v in e.items() if k not in ("step", "tokens")})
    return [points[s] for s in sorted(points)]


def _bench(job: Job, *, progress: JobProgress | None) -> tuple[str, dict | None, list[dict], str | None]:
    from depthwidth.bench.serving import BenchConfig, bench
    from depthwidth.machine import MEASURED
    from depthwidth.shapes.shape import Shape

    shape = Shape.from_dict(job.config["shape"])
    b = job.config["bench"]
    config = BenchConfig(prompt_lens=tuple(b["prompt_lens"]), contexts=tuple(b["contexts"]),
                         batches=tuple(b["batches"]), repeat=b["repeat"], dtype=b["dtype"], threads=job.threads,
                         allow_slow_dtype=bool(job.execution.get("allow_slow_dtype")))
    hardware = job.config.get("hardware", MEASURED)  # resolved by the bench: a table name, or this worker's profile
    callback = None
    if progress is not None:
        def callback(label: str, done: int, total: int) -> None:
            progress(phase=label, step=done, steps=total, loss=None, tokens_per_s=None, eta_s=None)
    result = bench(shape, config, progress=callback, hardware=hardware).to_dict()
    # the run's folder keeps what it is and what it measured, so a damaged store can be rebuilt from it
    folder = Path(job.run_dir)
    write_text(folder / RUN, json.dumps(job.config, indent=1, sort_keys=True))
    write_text(folder / RESULT, json.dumps(result, indent=1))
    return "completed", result, [], None


def _inspect(job: Job) -> tuple[str, dict | None, list[dict], str | None]:
    """`depthwidth inspect` of the finished training run in `job.run_dir`, on its own validation windows."""
    import torch

    from depthwidth.diagnose.inspect import inspect_run

    if job.threads:
        torch.set_num_threads(job.threads)
    settings = job.config["inspect"]
    result = inspect_run(job.run_dir, windows=settings["windows"], tolerance=settings["tolerance"])
    return "completed", result.to_dict(), [], None


__all__ = ["Job", "Outcome", "execute", "merge_curve", "run_dir", "worker_name"]
