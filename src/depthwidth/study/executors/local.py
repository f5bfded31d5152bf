"""The default executor: runs a study's jobs on this machine in `workers` worker processes (one at a time
with one worker), or in this process when asked to (`in_process`, one worker: a test's stand-in jobs).

- Workers are spawned processes (not forked: torch's thread pools do not survive a fork), started
  once and fed one job at a time over a pipe; each sends back progress and its `Outcome`, and only
  the driver writes the store. A worker that dies (killed, out of memory, a crash in native code such
  as libgomp's when it cannot start its threads) turns its job into a `failed` outcome, stored with
  how it died, and is replaced: a job run in the driver's own process would take the driver with it
  and leave its row `running`. A worker ends with its driver (`machine.die_with_parent`:
  PR_SET_PDEATHSIG on Linux, and a check of its parent), so a killed study leaves no worker writing
  its run folders.
- Cores are shared out by the jobs' thread counts (`Job.threads`): a job starts when a worker is free
  and enough of the `cores` are. A benchmark job (its latencies are the measurement) runs alone: it
  starts when nothing else runs, and nothing starts while it runs.
- The progress callback sees each job's steps, loss and tokens/s, with its `run_id`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from depthwidth.machine.processes import die_with_parent
from depthwidth.study.executors.base import JobFunction
from depthwidth.study.jobs import Job, JobProgress, Outcome, execute

#: job kinds that run alone (nothing else on the machine while they measure)
ALONE = ("bench",)


def _worker_main(conn: Connection, job_fn: JobFunction, parent: int | None = None) -> None:
    """A worker process: run each job received, sending ("progress", values) while it runs and
    ("outcome", Outcome) at its end; None ends the worker. `parent`: the driver's pid."""
    die_with_parent(parent)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return

        def progress(**values) -> None:
            conn.send(("progress", values))

        conn.send(("outcome", job_fn(job, progress=progress)))


@dataclass
class _Worker:
    process: multiprocessing.Process
    conn: Connection
    job: Job | None = None


class LocalExecutor:
    name = "local"

    def __init__(self, *, job_fn: JobFunction = execute, progress: JobProgress | None = None, workers: int = 1,
                 cores: int | None = None, in_process: bool = False) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r} must be a positive integer")
        self.in_process = in_process and workers == 1
        self._job_fn = job_fn
        self._progress = progress
        self.workers = workers
        self.cores = cores if cores is not None else workers
        self.capacity = workers  # jobs the driver keeps in flight
        self._queue: deque[Job] = deque()
        self._pool: list[_Worker] = []
        self._context = multiprocessing.get_context("spawn")

    def start(self) -> None:
        pass  # workers start when the first jobs need them

    def submit(self, job: Job) -> None:
        self._queue.append(job)

    def pending(self) -> int:
        return len(self._queue) + sum(w.job is not None for w in self._pool)

    def wait(self) -> tuple[Job, Outcome]:
        if not self.pending():
            raise RuntimeError("wait() with no submitted job")
        if self.in_process:  # in this process, in submission order
            job = self._queue.popleft()
            return job, self._job_fn(job, progress=self._progress)
        while True:
            self._dispatch()
            busy = [w for w in self._pool if w.job is not None]
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
            for worker in busy:
                done = self._receive(worker, ready)
                if done is not None:
                    return done

    def _receive(self, worker: _Worker, ready: list) -> tuple[Job, Outcome] | None:
        job = worker.job
        if worker.conn in ready:
            try:
                while worker.conn.poll():
                    kind, value = worker.conn.recv()
                    if kind == "outcome":
                        worker.job = None
                        return job, value
                    if self._progress is not None:
                        self._progress(run_id=job.run_id, **value)
            except (EOFError, OSError):
                pass  # the worker died mid-message: its sentinel says so below
        if worker.process.sentinel in ready or not worker.process.is_alive():
            worker.process.join(timeout=5)
            self._pool.remove(worker)
            how = exit_description(worker.process.exitcode)
            return job, Outcome(run_id=job.run_id, status="failed", result=None,
                                error=f"worker process died ({how})", worker=f"local:{worker.process.pid}")
        return None

    def _dispatch(self) -> None:
        """Start queued jobs, in order, while a worker and their cores are free (ALONE kinds alone)."""
        while self._queue:
            job = self._queue[0]
            running = [w.job for w in self._pool if w.job is not None]
            if running and (job.kind in ALONE or any(j.kind in ALONE for j in running)):
                return
            used = sum(max(1, j.threads or 1) for j in running)
            if len(running) >= self.workers or (running and used + max(1, job.threads or 1) > self.cores):
                return
            for idle in [w for w in self._pool if w.job is None and not w.process.is_alive()]:
                self._pool.remove(idle)  # died between jobs
                idle.conn.close()
            worker = next((w for w in self._pool if w.job is None), None) or self._spawn()
            worker.conn.send(self._queue.popleft())
            worker.job = job

    def _spawn(self) -> _Worker:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(theirs, self._job_fn, os.getpid()), daemon=True,
                                        name="depthwidth-worker")
        process.start()
        theirs.close()
        worker = _Worker(process=process, conn=ours)
        self._pool.append(worker)
        return worker

    def close(self) -> None:
        self._queue.clear()
        for worker in self._pool:
            try:
                if worker.job is None:
                    worker.conn.send(None)
            except OSError:
                pass
        for worker in self._pool:
            worker.process.join(timeout=2 if worker.job is None else 0)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._pool.clear()

    def describe(self) -> str:
        if self.in_process:
            return "local (this process, one run at a time)"
        if self.workers == 1:
            return "local (1 worker process, one run at a time)"
        return f"local ({self.workers} worker processes on {self.cores} cores)"


def exit_description(code: int | None) -> str:
    """How a process ended, from its exit code: "killed by signal 11 (SIGSEGV)" or "exit code 1"."""
    if code is not None and code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"killed by signal {-code}{name}"
    return f"exit code {code}"


__all__ = ["ALONE", "LocalExecutor", "exit_description"]
