"""Executors: where a study's runs execute. `local` (default) or `ray` (the `ray` extra).

The interface is `base.Executor`; the implementations import only `base`, and the factory below
imports each implementation when it is asked for (so the optional Ray backend loads only with it).
"""

from __future__ import annotations

from depthwidth.errors import UserError
from depthwidth.study.executors.base import EXECUTORS, Executor, JobFunction
from depthwidth.study.jobs import JobProgress, execute


def make_executor(name: str, *, address: str | None = None, study_dir: str | None = None,
                  cpus_per_run: float = 1, gpus_per_run: float | None = None, job_fn: JobFunction = execute,
                  progress: JobProgress | None = None, workers: int = 1, cores: int | None = None,
                  in_process: bool = False) -> Executor:
    """'local' (`workers` worker processes sharing `cores`; with `in_process` and one worker, this process
    runs the jobs itself, one after another) or 'ray' (the `ray` extra)."""
    if name == "local":
        from depthwidth.study.executors.local import LocalExecutor

        return LocalExecutor(job_fn=job_fn, progress=progress, workers=workers, cores=cores, in_process=in_process)
    if name == "ray":
        from depthwidth.study.executors.ray import RayExecutor

        return RayExecutor(address=address, study_dir=study_dir, cpus_per_run=cpus_per_run,
                           gpus_per_run=gpus_per_run, job_fn=job_fn)
    raise UserError(f"executor={name!r} is not known; expected one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "Executor", "JobFunction", "make_executor"]
