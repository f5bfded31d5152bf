"""A study's inspections ([inspect]): once its training runs and benchmarks are done, `depthwidth inspect` of
each finished shape - per full-horizon budget group, the first completed seed at the chosen learning rate
(`ShapeResult.best_run_ids`, the runs the report shows) - on that run's own validation windows
(`depthwidth.diagnose.inspect.inspect_run`, the slices weighted as the trainer weights them).

Each is a job like a benchmark: `jobs.execute` of kind "inspect" in a worker process, its outcome stored by
the driver in the store's `inspections` table, keyed by the training run and the settings ([inspect]
windows and tolerance). One stored as completed with the same settings is never repeated, so a resumed or
repeated `study run` inspects only what is new; a failed one is stored with its error and tried again by
the next `study run`. Horizon groups (`<group>@<h>`) are the same shapes at fewer tokens and are not
inspected. Nothing here touches a run: a spec with or without [inspect] expands to the same runs and ids.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from depthwidth.study.jobs import Job, run_dir
from depthwidth.study.store import Store

KIND = "inspect"


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned:
    """One inspection to run: the training run and the shape and group it stands for."""

    run_id: str
    shape_label: str
    group: str

    @property
    def label(self) -> str:
        return f"{self.shape_label} inspect"


def settings_key(settings: dict) -> str:
    return json.dumps(settings, sort_keys=True)


def chosen_runs(store: Store) -> list[Planned]:
    """Per full-horizon (group, shape) with a completed run at its chosen learning rate, that run (the first
    seed's), each run once."""
    from depthwidth.study.horizons import split_horizon
    from depthwidth.study.summary import summarize

    status = {r.run_id: r.status for r in store.runs(in_spec=None)}
    out: dict[str, Planned] = {}
    for row in summarize(store, running=True).rows:
        if split_horizon(row.group) is not None:
            continue
        run_id = next((i for i in row.best_run_ids if status.get(i) == "completed"), None)
        if run_id is not None:
            out.setdefault(run_id, Planned(run_id=run_id, shape_label=row.shape_label, group=row.group))
    return list(out.values())


def planned(store: Store, settings: dict) -> list[Planned]:
    """The chosen runs without a completed inspection of these `settings`."""
    key = settings_key(settings)
    done = {r.run_id for r in store.inspections() if r.status == "completed" and settings_key(r.settings) == key}
    return [p for p in chosen_runs(store) if p.run_id not in done]


def inspection_job(p: Planned, *, settings: dict, folder: Path, threads: int | None) -> Job:
    return Job(run_id=p.run_id, kind=KIND, config={"kind": KIND, "run_id": p.run_id, "inspect": dict(settings)},
               run_dir=str(run_dir(folder, p.run_id)), threads=threads, label=p.label)


def run_inspections(store: Store, runner, *, settings: dict, folder: Path, threads: Callable[..., int | None],
                    event: Callable[..., None] = lambda kind, **values: None) -> Counter:
    """Run every planned inspection on `runner` (an executor already started) and store each outcome; returns
    the counts of completed and failed ones. `threads(run)`: the torch threads of a stored training run
    (`RunRecord`), which its inspection gets too; `event(kind, **values)`: "run_start" and "run_end" of
    each, as a study's display sees a run (`runner.StudyEvent`)."""
    records = {r.run_id: r for r in store.runs(in_spec=None)}
    queue = [inspection_job(p, settings=settings, folder=folder, threads=threads(records[p.run_id]))
             for p in planned(store, settings)]
    counts: Counter = Counter()
    while queue or runner.pending():
        while queue and runner.pending() < runner.capacity:
            job = queue.pop(0)
            runner.submit(job)
            event("run_start", run_id=job.run_id, label=job.label, attempt=1)
        job, outcome = runner.wait()
        ok = outcome.status == "completed" and outcome.result is not None
        store.record_inspection(job.run_id, settings=settings, status="completed" if ok else "failed",
                                result=outcome.result if ok else None,
                                error=None if ok else (outcome.error or "failed without a message"),
                                wall_seconds=outcome.wall_seconds)
        counts["completed" if ok else "failed"] += 1
        event("run_end", run_id=job.run_id, label=job.label, status=outcome.status, error=outcome.error,
              seconds=outcome.wall_seconds)
    return counts


__all__ = ["KIND", "Planned", "chosen_runs", "inspection_job", "planned", "run_inspections", "settings_key"]
