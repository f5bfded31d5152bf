"""Run a study: validate and expand the spec (before anything is written), sync the store, skip what is
finished, run the rest on an executor, and write every outcome - from this driver process only.

Resume is the same call again: runs whose stored status is completed or diverged are never repeated;
pending, running (interrupted) and failed runs are run again, and a training run continues from its
checkpoint. A run whose attempt fails (an exception, a worker process or Ray worker that dies) is
retried until `execution.max_attempts` attempts in this invocation (default 2: retried once), then
stored as failed with its error; the study goes on. A job never runs in the driver's own process (a
test's stand-in aside), so no crash of a job can leave its row `running`.

With a learning-rate search (`[lr] search = "bracket"` or `transfer_from`) not every run is known up
front: after each outcome the driver asks `lr_plan.Planner` which trials the searches want next (a pure
function of the stored outcomes, so a resumed study asks for the same ones), syncs them to the store and
queues them before the benchmarks. With [inspect], the finished shapes are then inspected
(`depthwidth.study.inspections`), each once per settings.

One driver per study folder: `StudyLock` (an flock on `<study>/study.lock`) refuses a second one, and
tells readers whether `running` rows are live or left by a killed driver.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import write_text
from depthwidth.machine.processes import FolderLock, check_per_core, is_locked
from depthwidth.serial import Serializable
from depthwidth.study.eta import LiveRecord, predicted_runs
from depthwidth.study.executors import JobFunction, make_executor
from depthwidth.study.expand import Expansion, Run, expand
from depthwidth.study.jobs import Job, Outcome, execute, run_dir
from depthwidth.study.lr_plan import Planner
from depthwidth.study.spec import StudySpec, load_spec
from depthwidth.study.baselines import spec_baselines, write_baselines
from depthwidth.study.preflight import check_dtypes
from depthwidth.study.store import FINISHED, Store
from depthwidth.study.threads import available_cores, default_workers, recorded_threads, run_threads

LOCK_FILE = "study.lock"
SPEC_FILE = "spec.toml"  # a copy of the spec last run in the folder (what `study repair` falls back on)
DEFAULT_STUDIES_DIR = "studies"


@dataclass(frozen=True, kw_only=True, slots=True)
class StudyEvent:
    """What a display sees while a study runs.

    kind: "start" (total, todo, note = executor, workers, predicted_s = run id -> predicted seconds of each
    run to do, None where not predicted: `depthwidth.study.eta`), "run_start" (run_id, label, attempt), "run_progress"
    (run_id, progress: phase/step/steps/loss/tokens_per_s/eta_s), "run_end" (run_id, label, status, error,
    seconds), "retry" (run_id, label, error, attempt), "done" (counts).
    """

    kind: str
    total: int = 0
    done: int = 0
    todo: int = 0
    run_id: str = ""
    label: str = ""
    status: str = ""
    error: str | None = None
    attempt: int = 0
    seconds: float = 0.0
    progress: dict | None = None
    note: str = ""
    workers: int = 1
    predicted_s: dict[str, float | None] = field(default_factory=dict)


EventCallback = Callable[[StudyEvent], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunReport(Serializable):
    """What one `run_study` call did."""

    study_dir: str
    name: str
    total: int  # runs the spec asks for
    skipped: int  # already finished before this call
    new: int  # runs the store did not know
    completed: int
    diverged: int
    failed: int
    retries: int
    executor: str
    inspected: int = 0  # shapes inspected by this call ([inspect]; `depthwidth.study.inspections`)


class StudyLock(FolderLock):
    """Exclusive lock on a study folder for the life of one driver (`machine.FolderLock` on study.lock)."""

    def __init__(self, study_dir: str | os.PathLike) -> None:
        super().__init__(study_dir, file=LOCK_FILE, what="study")


def is_running(study_dir: str | os.PathLike) -> bool:
    """Whether a driver holds the study's lock right now."""
    return is_locked(study_dir, file=LOCK_FILE)


def default_study_dir(spec: StudySpec) -> Path:
    return Path(DEFAULT_STUDIES_DIR) / spec.name


def local_threads(run: Run, *, spec: StudySpec, folder: Path, cores: int | None = None) -> int:
    """Torch threads of one run on the local executor: what its folder recorded when it started (a
    resumed run keeps its count), else `threads.run_threads` of the run, the spec and the cores. Never
    the moment's load (`depthwidth.study.threads`)."""
    recorded = recorded_threads(run_dir(folder, run.run_id)) if run.kind == "train" else None
    cores = available_cores() if cores is None else cores
    return recorded or run_threads(run.config, cores=cores, fixed=spec.execution.threads)


def prepare(spec: StudySpec | str | os.PathLike) -> Expansion:
    """Load (when a path), validate and expand a spec; nothing is written."""
    if not isinstance(spec, StudySpec):
        spec = load_spec(spec)
    return expand(spec)


def run_study(
    spec: StudySpec | str | os.PathLike,
    *,
    study_dir: str | os.PathLike | None = None,
    executor: str = "local",
    address: str | None = None,
    on_event: EventCallback | None = None,
    job_fn: JobFunction = execute,
    workers: int | None = None,
) -> RunReport:
    """Run (or resume) the study of `spec` in `study_dir` (default studies/<name>) and return what was
    done. Every spec error is raised before the folder is touched. `workers` (local executor): runs at
    once in worker processes, default `execution.workers`, else `threads.default_workers`."""
    expansion = prepare(spec)
    spec = expansion.spec
    if executor == "local":
        check_dtypes(expansion)
        check_per_core("execution.threads", spec.execution.threads)  # this machine's bound, before the folder
    folder = Path(study_dir) if study_dir is not None else default_study_dir(spec)
    emit = LiveRecord(folder, on_event)  # <study>/live.json for `study status`, then the caller's display
    running: list[str] = []  # run ids in flight, in submission order

    def progress(run_id: str | None = None, **values) -> None:  # the local executor's live view of its jobs
        emit(StudyEvent(kind="run_progress", run_id=run_id or (running[0] if running else ""), progress=values))

    cores = available_cores()
    threads_of = _thread_choice(spec, executor=executor, folder=folder, cores=cores)
    # a real job runs in a worker process even alone: one that crashes (a segfault in a kernel, libgomp ending
    # the process) then ends as a failed outcome the driver records; a test's stand-in runs in this process
    # unless workers are asked for
    in_process = job_fn is not execute and workers is None
    workers = _workers(expansion, executor=executor, given=workers, cores=cores, folder=folder,
                       stand_in=job_fn is not execute)
    runner = make_executor(executor, address=address, study_dir=str(folder), cpus_per_run=spec.execution.cpus_per_run,
                           gpus_per_run=spec.execution.gpus_per_run, job_fn=job_fn, progress=progress,
                           workers=workers, cores=max(cores, workers),  # --workers above the cores: asked for
                           in_process=in_process)
    if executor == "ray":
        from depthwidth.study.executors.ray import check_address, import_ray

        import_ray()  # a missing extra, or an address that does not answer: before the folder is touched
        if address:
            check_address(address)
    with StudyLock(folder), Store.create(folder, name=spec.name, spec=spec.to_dict(), spec_text=spec.text,
                                         source=spec.source) as store:
        planner = Planner(expansion=expansion)
        plan, new = _sync_plan(store, planner)
        write_text(folder / SPEC_FILE, spec.text)
        write_baselines(folder, spec_baselines(spec.data))  # what every verdict is judged against (study.validity)
        stored = {r.run_id: r for r in store.runs()}
        unfinished = [r for r in _ordered(plan) if not stored[r.run_id].finished]
        todo = _jobs(unfinished, plan)
        skipped = len(plan) - len(unfinished)
        threads = sorted({threads_of(r) for r in todo})
        adaptive = any(m.kind != "grid" for m in expansion.modes.values())

        def replan() -> tuple[int, list[Run], dict]:  # the trials the LR searches ask for after an outcome
            runs, _ = _sync_plan(store, planner)
            finished = {r.run_id for r in store.runs() if r.finished}
            return len(runs), _jobs([r for r in _ordered(runs) if r.run_id not in finished], runs), _branches_of(runs)

        runner.start()
        try:
            emit(StudyEvent(kind="start", total=len(plan), done=skipped, todo=len(todo), workers=runner.capacity,
                            note=f"{runner.describe()}; {'/'.join(map(str, threads)) or 0} torch thread(s) per run",
                            predicted_s=predicted_runs(unfinished, hardware=spec.hardware, threads=threads_of)))
            driver = _Driver(store=store, runner=runner, folder=folder, spec=spec, threads=threads_of, emit=emit,
                             running=running, total=len(plan), skipped=skipped, replan=replan if adaptive else None,
                             branches=_branches_of(plan),
                             settled={r.run_id for r in plan if stored[r.run_id].finished})
            counts = driver.run(todo)
            inspected = 0
            if spec.inspect is not None and spec.inspect.enabled:  # the finished shapes, once per settings
                from depthwidth.study.inspections import run_inspections

                done = run_inspections(store, runner, settings=spec.inspect.settings(), folder=folder,
                                       threads=threads_of, event=lambda kind, **values: emit(StudyEvent(
                                           kind=kind, total=driver.total, done=driver.total, **values)))
                inspected = done["completed"]
        finally:
            runner.close()
        report = RunReport(study_dir=str(folder), name=spec.name, total=driver.total, skipped=skipped,
                           new=new, completed=counts["completed"], diverged=counts["diverged"],
                           failed=counts["failed"], retries=counts["retries"], executor=runner.describe(),
                           inspected=inspected)
        emit(StudyEvent(kind="done", total=report.total, done=skipped + report.completed + report.diverged))
        return report


def _branches_of(plan) -> dict[str, list[Run]]:
    """parent run id -> the cooldown branches it trains (`depthwidth.study.horizons`)."""
    out: dict[str, list[Run]] = {}
    for r in plan:
        if r.parent is not None:
            out.setdefault(r.parent, []).append(r)
    return out


def _jobs(unfinished: list[Run], plan) -> list[Run]:
    """What to submit for the unfinished runs: each run that is not a branch, and the parent of each
    unfinished branch (a finished parent returns at once with its branches' results), once each, in order."""
    by_id = {r.run_id: r for r in plan}
    out: dict[str, Run] = {}
    for r in unfinished:
        job = by_id[r.parent] if r.parent is not None else r
        out.setdefault(job.run_id, job)
    return list(out.values())


def _sync_plan(store: Store, planner: Planner) -> tuple[tuple[Run, ...], int]:
    """The runs the study asks for now (each LR search walked over the stored outcomes), synced to the
    store; and how many of them the store did not know."""
    losses = {r.run_id: r.val_loss for r in store.results(in_spec=None)}
    outcomes = {r.run_id: (r.status, losses.get(r.run_id)) for r in store.runs(in_spec=None)}
    runs = planner.runs(outcomes)
    return runs, store.sync_runs(r.to_row() for r in runs)


def _thread_choice(spec: StudySpec, *, executor: str, folder: Path, cores: int) -> Callable[[Run], int]:
    """Run -> its torch threads: execution.threads, else the CPUs per Ray task, else `local_threads`."""
    if executor == "ray":
        return lambda run: spec.execution.threads or max(1, int(spec.execution.cpus_per_run))
    return lambda run: local_threads(run, spec=spec, folder=folder, cores=cores)


def _workers(expansion: Expansion, *, executor: str, given: int | None, cores: int, folder: Path,
             stand_in: bool = False) -> int:
    """Local worker processes: `given` (--workers), else execution.workers, else as many runs of the
    fewest threads as the cores hold (`threads.default_workers`, over the training runs); a stand-in
    job function (a test's) runs in this process unless workers are asked for."""
    if executor != "local":
        return 1
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise UserError(f"workers={given!r} must be a positive integer")
        check_per_core("workers", given, what="worker processes", cores=cores)
        return given
    if expansion.spec.execution.workers:
        check_per_core("execution.workers", expansion.spec.execution.workers, what="worker processes", cores=cores)
        return expansion.spec.execution.workers
    if stand_in:
        return 1
    spec = expansion.spec
    train = [r for r in expansion.runs if r.kind == "train"]
    return default_workers((local_threads(r, spec=spec, folder=folder, cores=cores) for r in train), cores=cores)


@dataclass(kw_only=True, slots=True)
class _Driver:
    """Keeps the executor full, records each outcome as it arrives, and retries failed attempts."""

    store: Store
    runner: object
    folder: Path
    spec: StudySpec
    threads: Callable[[Run], int]  # a run's torch threads (`local_threads`)
    emit: EventCallback
    running: list[str]
    total: int
    skipped: int
    counts: Counter = field(default_factory=Counter)
    attempts: Counter = field(default_factory=Counter)
    replan: Callable[[], tuple[int, list[Run], dict]] | None = None  # (runs in all, to submit, branches) after each outcome
    branches: dict[str, list[Run]] = field(default_factory=dict)  # parent run id -> its cooldown branches
    settled: set[str] = field(default_factory=set)  # runs recorded (finished, or failed for good) in this call

    def run(self, todo: list[Run]) -> Counter:
        current = {r.run_id: r for r in todo}
        queue = list(todo)
        full: str | None = None  # a full disk stops the study: the jobs in flight finish, nothing new starts
        while queue or self.runner.pending():
            while queue and self.runner.pending() < self.runner.capacity:
                self._submit(queue.pop(0))
            job, outcome = self.runner.wait()
            self.running.remove(job.run_id)
            run = current[job.run_id]
            if outcome.disk_full is not None:
                self.store.record_error(job.run_id, error=outcome.error or "no space left on device", final=False)
                full, queue = full or outcome.disk_full, []
                continue
            self._record_branches(run, outcome)
            first = job.run_id not in self.settled  # a finished parent may come again, for its branches
            if _record(self.store, outcome, attempts=self.attempts[job.run_id],
                       max_attempts=self.spec.execution.max_attempts):
                self.settled.add(job.run_id)
                if first:
                    self._count(run, outcome)
                if self.replan is not None:
                    self.total, unfinished, branches = self.replan()
                    self.branches.update(branches)
                    proposed = [r for r in unfinished if r.run_id not in current]
                    current.update((r.run_id, r) for r in proposed)
                    benches = next((i for i, r in enumerate(queue) if r.kind == "bench"), len(queue))
                    queue[benches:benches] = proposed  # new trials before the benchmarks
            else:
                self.counts["retries"] += 1
                self.emit(StudyEvent(kind="retry", run_id=job.run_id, label=run.label(), error=outcome.error,
                                     attempt=self.attempts[job.run_id]))
                queue.insert(0, run)
            if full is not None:
                queue = []
        if full is not None:
            raise UserError(f"{full}: cannot write the run's files (No space left on device); the study stopped and "
                            "nothing stored is lost: free some space, then run the same command again")
        return self.counts

    def _count(self, run: Run, outcome: Outcome) -> None:
        self.counts[outcome.status] += 1
        self.emit(StudyEvent(kind="run_end", total=self.total, done=self.skipped + sum(self.counts.values()),
                             run_id=run.run_id, label=run.label(), status=outcome.status, error=outcome.error,
                             seconds=outcome.wall_seconds))

    def _record_branches(self, parent: Run, outcome: Outcome) -> None:
        """Store the cooldown branches of a parent's outcome before the parent itself (so a parent stored as
        finished has them); a parent that failed for good leaves its unfinished branches failed with it."""
        by_id = {r.run_id: r for r in self.branches.get(parent.run_id, ())}
        for branch in outcome.branches:
            if branch.run_id in by_id and _record(self.store, branch, attempts=1, max_attempts=1) \
                    and branch.run_id not in self.settled:
                self.settled.add(branch.run_id)
                self._count(by_id[branch.run_id], branch)
        failed = outcome.status not in FINISHED and self.attempts[parent.run_id] >= self.spec.execution.max_attempts
        for run_id, branch in by_id.items():
            if failed and run_id not in self.settled:
                self.store.record_error(run_id, error=f"the run it branches from failed: {outcome.error}", final=True)
                self.settled.add(run_id)
                self.counts["failed"] += 1

    def _submit(self, run: Run) -> None:
        self.attempts[run.run_id] += 1
        self.store.mark_running(run.run_id, worker=self.runner.name)
        self.running.append(run.run_id)
        branches = tuple((b.horizon, b.run_id) for b in self.branches.get(run.run_id, ()))
        self.runner.submit(Job(run_id=run.run_id, kind=run.kind, config=run.config,
                               run_dir=str(run_dir(self.folder, run.run_id)), threads=self.threads(run),
                               execution=self.spec.execution_settings(), label=run.label(), branches=branches))
        self.emit(StudyEvent(kind="run_start", run_id=run.run_id, label=run.label(),
                             attempt=self.attempts[run.run_id]))


def _record(store: Store, outcome: Outcome, *, attempts: int, max_attempts: int) -> bool:
    """Write an outcome; True when the run is settled (finished, or failed for good)."""
    if outcome.status in FINISHED:
        store.record_finished(outcome.run_id, status=outcome.status, result=outcome.result or {},
                              curve=list(outcome.curve), wall_seconds=outcome.wall_seconds, worker=outcome.worker)
        return True
    final = attempts >= max_attempts
    store.record_error(outcome.run_id, error=outcome.error or "failed without a message", final=final)
    return final


def _ordered(runs: tuple[Run, ...]) -> list[Run]:
    """Training runs first (in spec order), then the benchmarks (short, and best on a quiet machine)."""
    return [r for r in runs if r.kind == "train"] + [r for r in runs if r.kind == "bench"]


__all__ = ["RunReport", "StudyEvent", "StudyLock", "available_cores", "default_study_dir", "is_running", "local_threads",
           "prepare",
           "run_study"]
