"""The default executor: runs jobs one after another in this process, in submission order.

A progress callback (the study's display) sees the current run's steps, loss and tokens/s.
"""

from __future__ import annotations

from collections import deque

from depthwidth.study.executors.base import JobFunction
from depthwidth.study.jobs import Job, JobProgress, Outcome, execute


class LocalExecutor:
    name = "local"
    capacity = 1  # jobs in flight at once

    def __init__(self, *, job_fn: JobFunction = execute, progress: JobProgress | None = None) -> None:
        self._job_fn = job_fn
        self._progress = progress
        self._queue: deque[Job] = deque()

    def start(self) -> None:
        pass

    def submit(self, job: Job) -> None:
        self._queue.append(job)

    def pending(self) -> int:
        return len(self._queue)

    def wait(self) -> tuple[Job, Outcome]:
        if not self._queue:
            raise RuntimeError("wait() with no submitted job")
        job = self._queue.popleft()
        return job, self._job_fn(job, progress=self._progress)

    def close(self) -> None:
        self._queue.clear()

    def describe(self) -> str:
        return "local (this process, one run at a time)"


__all__ = ["LocalExecutor"]
