"""The records a study store returns (`depthwidth.study.store.Store`): one frozen dataclass per row kind,
and their conversion from SQLite rows. With them the column lists (`CURVE_KEYS`,
`RESULT_KEYS`) and the run statuses (`STATUSES`, `FINISHED`)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from depthwidth.errors import UserError
from depthwidth.artifact.result import STATUSES as RUN_STATUSES

#: a stored run's status: waiting or in flight, then how its run ended (`depthwidth.artifact.result.STATUSES`)
STATUSES = ("pending", "running", *RUN_STATUSES)
FINISHED = tuple(s for s in RUN_STATUSES if s != "failed")  # outcomes a resumed study never repeats
CURVE_KEYS = ("step", "tokens", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s")
RESULT_KEYS = ("val_loss", "tokens_per_s", "mfu", "peak_memory_bytes", "params", "tokens", "batch_stream_hash",
               "corpus_hash")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    run_id: str
    kind: str  # "train" | "bench"
    group: str  # budget group the run belongs to (its family)
    shape_label: str
    lr: float | None
    seed: int | None
    lr_trials: int | None  # LR trials its shape gets under the spec that created it
    config: dict  # the canonical run config; run_id == config_hash(config)
    in_spec: bool
    status: str
    attempts: int
    error: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    wall_seconds: float | None
    train_seconds: float | None
    eval_seconds: float | None
    worker: str | None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class CurvePoint:
    step: int
    tokens: int | None
    train_loss: float | None
    val_loss: float | None
    lr: float | None
    grad_norm: float | None
    tokens_per_s: float | None
    extra: dict

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultRecord:
    run_id: str
    kind: str
    val_loss: float | None
    tokens_per_s: float | None
    mfu: float | None
    peak_memory_bytes: int | None
    params: int | None
    tokens: int | None
    batch_stream_hash: str | None
    corpus_hash: str | None
    data: dict  # the whole TrainResult / BenchResult as a dict (curve left out: see curves())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class InspectionRecord:
    """The per-layer diagnostics of one finished training run (`depthwidth.study.inspections`)."""

    run_id: str  # the training run inspected
    settings: dict  # [inspect] windows and tolerance it was measured with
    status: str  # "completed" | "failed"
    error: str | None
    data: dict | None  # `depthwidth.diagnose.inspect.Inspection.to_dict()`; None when it failed
    wall_seconds: float | None
    finished_at: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: what follows every message about a damaged row
REPAIR_HINT = "`depthwidth study repair DIR` rebuilds the store from the spec and the run folders"
#: numeric columns of each row kind, checked on reading (SQLite stores any type in any column)
RUN_NUMBERS = ("lr", "seed", "lr_trials", "attempts", "created_at", "started_at", "finished_at", "wall_seconds",
               "train_seconds", "eval_seconds")
RESULT_NUMBERS = ("val_loss", "tokens_per_s", "mfu", "peak_memory_bytes", "params", "tokens")
#: text columns of each row kind, checked on reading: (always text, text or NULL)
RUN_TEXTS = (("run_id", "kind", "grp", "shape_label", "status"), ("error", "worker"))
RESULT_TEXTS = ((), ("batch_stream_hash", "corpus_hash"))


def damaged_row(row: sqlite3.Row, what: str) -> UserError:
    """The error for a stored row that cannot be what the store wrote (a damaged or hand-edited store)."""
    return UserError(f"study store: run {str(row['run_id'])[:16]}: {what}; {REPAIR_HINT}")


def stored_json(row: sqlite3.Row, column: str, *, empty: Any = None) -> dict:
    """The JSON object in `column` of a stored row (`empty` when the column is NULL and that is allowed)."""
    text = row[column]
    if text is None and empty is not None:
        return empty
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError) as exc:
        raise damaged_row(row, f"its stored {column} is not valid JSON ({str(exc).split(';')[0]})") from None
    if not isinstance(value, dict):
        raise damaged_row(row, f"its stored {column} is {type(value).__name__}, not a JSON object")
    return value


def check_numbers(row: sqlite3.Row, columns: tuple[str, ...]) -> None:
    for column in columns:
        value = row[column]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise damaged_row(row, f"its stored {column} is {value!r:.40}, not a number")


def check_texts(row: sqlite3.Row, columns: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    """The first columns must hold text, the others text or NULL."""
    required, optional = columns
    for column in (*required, *optional):
        value = row[column]
        if not isinstance(value, str) and (value is not None or column in required):
            raise damaged_row(row, f"its stored {column} is {value!r:.40}, not text")


def run_record(row: sqlite3.Row) -> RunRecord:
    check_numbers(row, RUN_NUMBERS)
    check_texts(row, RUN_TEXTS)
    return RunRecord(
        run_id=row["run_id"], kind=row["kind"], group=row["grp"], shape_label=row["shape_label"], lr=row["lr"],
        seed=row["seed"], lr_trials=row["lr_trials"], config=stored_json(row, "config"), in_spec=bool(row["in_spec"]),
        status=row["status"], attempts=row["attempts"], error=row["error"], created_at=row["created_at"],
        started_at=row["started_at"], finished_at=row["finished_at"], wall_seconds=row["wall_seconds"],
        train_seconds=row["train_seconds"], eval_seconds=row["eval_seconds"], worker=row["worker"],
    )


def curve_point(row: sqlite3.Row) -> CurvePoint:
    check_numbers(row, CURVE_KEYS)
    return CurvePoint(**{k: row[k] for k in CURVE_KEYS}, extra=stored_json(row, "extra", empty={}))


def inspection_record(row: sqlite3.Row) -> InspectionRecord:
    check_numbers(row, ("wall_seconds", "finished_at"))
    check_texts(row, (("run_id", "settings", "status"), ("error", "result")))
    return InspectionRecord(run_id=row["run_id"], settings=stored_json(row, "settings"), status=row["status"],
                            error=row["error"], data=None if row["result"] is None else stored_json(row, "result"),
                            wall_seconds=row["wall_seconds"], finished_at=row["finished_at"])


def result_record(row: sqlite3.Row) -> ResultRecord:
    check_numbers(row, RESULT_NUMBERS)
    check_texts(row, RESULT_TEXTS)
    return ResultRecord(run_id=row["run_id"], kind=row["kind"], **{k: row[k] for k in RESULT_KEYS},
                        data=stored_json(row, "result"))


__all__ = ["CURVE_KEYS", "FINISHED", "REPAIR_HINT", "RESULT_KEYS", "STATUSES", "CurvePoint", "InspectionRecord",
           "ResultRecord", "RunRecord",
           "check_numbers", "check_texts", "curve_point", "damaged_row", "inspection_record", "result_record",
           "run_record", "stored_json"]
