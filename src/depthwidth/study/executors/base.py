"""The executor interface: a study's driver submits jobs and waits for their outcomes, one at a time.

    executor.start()               acquire resources (a Ray cluster, ...)
    executor.submit(job)           queue one run
    job, outcome = executor.wait() block until some submitted job has an outcome
    executor.close()               release resources

Executors never write the store (the driver does, in one process), never retry (the driver decides),
and turn a crashed or killed worker into a `failed` Outcome carrying what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from depthwidth.errors import UserError
from depthwidth.study.jobs import Job, JobProgress, Outcome, execute

#: What runs a job: `execute` in production; tests may pass a stand-in with the same signature.
JobFunction = Callable[..., Outcome]
EXECUTORS = ("local", "ray")


class Executor(Protocol):
    name: str
    capacity: int  # jobs the driver keeps in flight

    def start(self) -> None: ...

    def submit(self, job: Job) -> None: ...

    def wait(self) -> tuple[Job, Outcome]: ...

    def pending(self) -> int: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


def make_executor(name: str, *, address: str | None = None, study_dir: str | None = None,
                  cpus_per_run: float = 1, gpus_per_run: float = 0, job_fn: JobFunction = execute,
                  progress: JobProgress | None = None) -> Executor:
    """'local' (this process, one run after another) or 'ray' (the `ray` extra)."""
    if name == "local":
        from depthwidth.study.executors.local import LocalExecutor

        return LocalExecutor(job_fn=job_fn, progress=progress)
    if name == "ray":
        from depthwidth.study.executors.ray import RayExecutor

        return RayExecutor(address=address, study_dir=study_dir, cpus_per_run=cpus_per_run,
                           gpus_per_run=gpus_per_run, job_fn=job_fn)
    raise UserError(f"executor={name!r} is not known; expected one of {', '.join(EXECUTORS)}")


__all__ = ["EXECUTORS", "Executor", "JobFunction", "make_executor"]
