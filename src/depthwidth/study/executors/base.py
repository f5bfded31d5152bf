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

from depthwidth.study.jobs import Job, Outcome

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


__all__ = ["EXECUTORS", "Executor", "JobFunction"]
