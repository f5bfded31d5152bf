"""`repair_study(dir)`: rebuild or repair a study's `study.sqlite` from its spec and its run folders.

Every finished run leaves its outcome in its own folder, `runs/<run id[:16]>/`: a training run its
`result.json` (the `TrainResult`, curve included, written by the trainer), a benchmark run its
`run.json` (its canonical config) and `result.json`. So a store that was truncated, zeroed, overwritten
with random bytes or edited by hand loses nothing that matters:

1. The store is checked: opened (`Store.open` runs SQLite's quick check) and every row decoded. An
   intact store is repaired in place; a damaged one is moved aside to `study.sqlite.damaged[.N]` (never
   deleted, with its -wal/-shm files) after whatever can still be read from it is taken: the spec text
   and the run rows. A store that cannot be read where it is (a full disk, an I/O error, a lock: a
   `StoreAccessError`) is not damaged: the repair stops with that one line and moves nothing.
2. The spec: `spec` when given, else the one the store recorded, else `<study>/spec.toml` (the copy
   `study run` writes). It is expanded again (the corpus must be unchanged), which gives every run its
   id, group and config.
3. Each run that the store does not hold as finished gets its outcome from its folder, verified: the
   folder's result must belong to exactly that run (a training result rebuilds the run's config, a
   benchmark's run.json hashes to the run id). Its status, result and curve are written in one
   transaction, as the driver writes them, so the stored losses and curves are those of the run.

What cannot be recovered is said, folder by folder; runs without a finished result stay pending and
the next `study run` runs them (a training run resumes from its checkpoint). The report is a
`RepairReport`; nothing here prints.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import read_text
from depthwidth.study.jobs import RUNS_FOLDER, merge_curve
from depthwidth.study.records import CURVE_KEYS, FINISHED, RESULT_KEYS
from depthwidth.study.run_config import config_hash, train_run_config
from depthwidth.study.runner import SPEC_FILE, StudyLock, prepare
from depthwidth.study.store import STORE_FILE, Store, StoreAccessError
from depthwidth.artifact.folder import RESULT, RUN, read_json
from depthwidth.artifact.config import TrainConfig, with_added_fields

DAMAGED_SUFFIX = ".damaged"


@dataclass(frozen=True, kw_only=True, slots=True)
class RepairReport:
    """What `repair_study` found and did."""

    study_dir: str
    store: str  # "intact", "missing", or "damaged (why)"
    moved_to: str | None  # where a damaged store was kept
    spec_source: str  # where the spec came from
    runs: int  # runs the spec asks for
    finished_before: int  # runs the store already held as finished (an intact store)
    recovered: tuple[str, ...]  # run ids whose outcome was read from their folder
    rewritten: tuple[str, ...]  # finished run ids whose stored outcome differed from their folder's
    pending: tuple[str, ...]  # run ids with no finished outcome anywhere: the next `study run` runs them
    unusable: tuple[tuple[str, str], ...]  # (run folder, why it could not be used)

    def to_dict(self) -> dict:
        return asdict(self) | {"recovered": list(self.recovered), "rewritten": list(self.rewritten),
                               "pending": list(self.pending),
                               "unusable": [{"folder": f, "why": w} for f, w in self.unusable]}


def repair_study(study_dir: str | Path, *, spec: str | Path | None = None) -> RepairReport:
    """Repair (or rebuild) the store of the study in `study_dir`; see the module docstring. Refused while
    a driver runs the study, and when no spec can be found."""
    folder = Path(study_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such study folder")
    if not any((folder / name).exists() for name in (STORE_FILE, SPEC_FILE, RUNS_FOLDER)):
        raise UserError(f"{folder}: not a study folder (it holds no {STORE_FILE}, {SPEC_FILE} or {RUNS_FOLDER}/)")
    with StudyLock(folder):
        state, salvaged = _diagnose(folder / STORE_FILE)
        expansion, source = _expansion(folder, spec=spec, salvaged=salvaged)
        name = expansion.spec.name
        if state == "intact" and spec is None and salvaged.get("name") != name:
            state = f"damaged (it names the study {salvaged.get('name')!r}, its spec {name!r})"
        moved = _move_aside(folder / STORE_FILE) if state.startswith("damaged") else None
        with Store.create(folder, name=name, spec=expansion.spec.to_dict(), spec_text=expansion.spec.text,
                          source=expansion.spec.source) as store:
            wanted = {r.run_id for r in expansion.runs}
            store.sync_runs(row for row in salvaged.get("runs", []) if row["run_id"] not in wanted)
            store.sync_runs(r.to_row() for r in expansion.runs)
            finished_before = sum(r.finished for r in store.runs())
            recovered, rewritten, unusable = _fill_from_folders(store, folder)
            pending = tuple(r.run_id for r in store.runs() if not r.finished)
        return RepairReport(study_dir=str(folder), store=state, moved_to=moved, spec_source=source,
                            runs=len(expansion.runs), finished_before=finished_before, recovered=recovered,
                            rewritten=rewritten, pending=pending, unusable=unusable)


def prepare_text(text: str, *, source: str):
    """The expansion of a spec given as TOML text (named `source` in errors)."""
    from depthwidth.study.spec import parse_spec

    return prepare(parse_spec(text, source=source))


# ---- the store as found --------------------------------------------------------------------------
def _diagnose(path: Path) -> tuple[str, dict]:
    """("intact" | "missing" | "damaged (why)", what could be read: spec text, source, run rows)."""
    if not path.exists():
        return "missing", {}
    try:
        with Store.open(path.parent) as store:
            store.runs(in_spec=None)
            for run in store.runs(in_spec=None):
                store.curves(run.run_id)
            store.results(in_spec=None)
            return "intact", {"spec_text": store.spec_text(), "spec_source": f"{path} (the spec it recorded)",
                              "name": store.name}
    except StoreAccessError:  # a full disk, an I/O error, a lock: not damage, and nothing is moved aside
        raise
    except (UserError, sqlite3.Error, UnicodeDecodeError) as exc:
        return f"damaged ({str(exc).split('; `depthwidth study repair')[0]})", _salvage(path)


def _salvage(path: Path) -> dict:
    """Whatever rows of a damaged store SQLite can still read: the spec text and the run rows (each
    read on its own, so one bad page costs the rows on it, not the table)."""
    out: dict = {}
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except (sqlite3.Error, UnicodeDecodeError):
        return out
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'spec_text'").fetchone()
        if row and isinstance(row[0], str) and row[0].strip():
            out["spec_text"], out["spec_source"] = row[0], f"{path} (the spec it recorded, salvaged)"
    except (sqlite3.Error, UnicodeDecodeError):
        pass
    out["runs"] = _salvage_runs(conn)
    conn.close()
    return out


def _salvage_runs(conn: sqlite3.Connection) -> list[dict]:
    from depthwidth.files import loads

    rows = []
    try:
        cursor = conn.execute("SELECT run_id, kind, grp, shape_label, lr, seed, lr_trials, config FROM runs")
        for run_id, kind, group, label, lr, seed, trials, text in cursor:
            try:
                config = loads(text, source="row")
            except (UserError, TypeError):
                continue
            if isinstance(config, dict) and kind in ("train", "bench") and isinstance(run_id, str):
                rows.append({"run_id": run_id, "kind": kind, "group": str(group), "shape_label": str(label),
                             "lr": lr, "seed": seed, "lr_trials": trials, "config": config})
    except (sqlite3.Error, UnicodeDecodeError):
        pass  # the rows read before the damage are kept
    return rows


def _expansion(folder: Path, *, spec: str | Path | None, salvaged: dict):
    """(The expansion of the study's spec, where it came from): `spec` when given, else the first of the
    store's recorded spec and the folder's spec.toml that is a valid spec (a store's copy may be damaged)."""
    if spec is not None:
        return prepare_text(read_text(spec, what="study spec"), source=str(spec)), str(spec)
    candidates = [(salvaged["spec_text"], salvaged["spec_source"])] if salvaged.get("spec_text") else []
    if (folder / SPEC_FILE).is_file():
        candidates.append((read_text(folder / SPEC_FILE, what="study spec"), str(folder / SPEC_FILE)))
    if not candidates:
        raise UserError(f"{folder}: no spec to rebuild the study from (the store has none and there is no "
                        f"{SPEC_FILE}); give the spec the study was run with: depthwidth study repair {folder} "
                        "--spec SPEC")
    for i, (text, source) in enumerate(candidates):
        try:
            return prepare_text(text, source=source), source
        except UserError:
            if i == len(candidates) - 1:
                raise
    raise AssertionError("unreachable")


def _move_aside(path: Path) -> str:
    """Rename a damaged store (and its -wal/-shm) to the first free `study.sqlite.damaged[.N]`."""
    n = 0
    while True:
        target = path.with_name(path.name + DAMAGED_SUFFIX + (f".{n}" if n else ""))
        if not target.exists():
            break
        n += 1
    for suffix in ("-wal", "-shm", ""):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return str(target)


# ---- the run folders -----------------------------------------------------------------------------
def _fill_from_folders(store: Store, folder: Path) -> tuple[tuple[str, ...], tuple[str, ...], tuple]:
    """Record the verified outcome of every run whose folder holds one and whose stored outcome is missing
    or differs from it; (recovered run ids, rewritten run ids, (folder, why) of each unusable folder)."""
    runs = {r.run_id[:16]: r for r in store.runs(in_spec=None)}
    recovered, rewritten, unusable = [], [], []
    root = folder / RUNS_FOLDER
    for sub in sorted(root.iterdir()) if root.is_dir() else ():
        name, run = f"{RUNS_FOLDER}/{sub.name}", runs.get(sub.name)
        if not (sub / RESULT).exists():
            continue
        if run is None:
            unusable.append((name, "a finished run that belongs to no run of the spec or the store"))
            continue
        try:
            status, result, curve = _outcome(run, sub)
        except UserError as exc:
            unusable.append((name, str(exc)))
            continue
        if run.finished and _stored_as(store, run, status=status, result=result, curve=curve):
            continue
        store.record_finished(run.run_id, status=status, result=result, curve=curve, wall_seconds=run.wall_seconds)
        (rewritten if run.finished else recovered).append(run.run_id)
    return tuple(recovered), tuple(rewritten), tuple(unusable)


def _stored_as(store: Store, run, *, status: str, result: dict, curve: list[dict]) -> bool:
    """Whether the store holds exactly this outcome of `run` (its status, result, headline columns and
    curve; compared as JSON text, so a NaN equals a NaN)."""
    stored = store.result(run.run_id)
    if stored is None or run.status != status:
        return False
    points = [{k: getattr(p, k) for k in CURVE_KEYS} | p.extra for p in store.curves(run.run_id)]
    return _json(stored.data) == _json(result) and _json(points) == _json([_as_stored(p, CURVE_KEYS) for p in curve]) \
        and _json({k: getattr(stored, k) for k in RESULT_KEYS}) == _json(_as_stored(result, RESULT_KEYS, only=True))


def _as_stored(point: dict, columns: tuple[str, ...], *, only: bool = False) -> dict:
    """A curve point or result as the store's columns read it back: every column present, NaN as NULL."""
    out = {k: None if isinstance(point.get(k), float) and math.isnan(point[k]) else point.get(k) for k in columns}
    return out if only else out | {k: v for k, v in point.items() if k not in columns}


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _outcome(run, sub: Path) -> tuple[str, dict, list[dict]]:
    """(status, result, curve) of a run from its folder, as the driver stores them; UserError when the
    folder's result is unreadable or belongs to another run."""
    data = read_json(sub / RESULT)
    if run.kind == "bench":
        if config_hash(read_json(sub / RUN)) != run.run_id:
            raise UserError(f"its {RUN} is not the config of run {run.run_id[:16]}")
        return "completed", data, []
    try:
        config = TrainConfig.from_dict(with_added_fields(data["config"]))
        rebuilt = train_run_config(shape=data["shape"], corpus_hash=data["corpus_hash"], config=config,
                                   init_hash=run.config.get("init_hash"))  # a run from an init_from folder
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"its {RESULT} is not a training result ({type(exc).__name__}: {exc})") from None
    if config_hash(rebuilt) != run.run_id:
        raise UserError(f"its {RESULT} is the result of another run (shape, data or settings differ)")
    if data.get("status") not in FINISHED:
        raise UserError(f"its {RESULT} has status {data.get('status')!r}, not one of {', '.join(FINISHED)}")
    curve = merge_curve(data.pop("curve", None) or [], data.get("evals") or [], tokens_per_step=config.tokens_per_step)
    return data["status"], data, curve


__all__ = ["DAMAGED_SUFFIX", "RepairReport", "prepare_text", "repair_study"]
