"""The communication columns of a study's per-shape result (`depthwidth.study.summary.ShapeResult`), read
from each run's stored result (`ResultRecord.data`: `TrainResult.comm` and `comm_fraction`,
`depthwidth.train.comm_meter.comm_fields`).

Per run: the bytes and seconds of every collective kind of one optimizer step (measured means, the first
step left out), summed over the kinds and divided by the step's tokens (`comm.tokens_per_step`, the
global batch), and the same for the analytic prediction (`predicted_bytes`, `predicted_seconds`; no
predicted time when any kind has none, i.e. before `depthwidth hw measure --collectives`). Bytes are
what one rank sends (what it contributes to an all-reduce; the unsharded tensor of a reduce-scatter or
all-gather). Over a shape's seeds each column is the mean of the runs that have it, as the other
measured columns are; a single-process run has no `comm` and every column is None (never 0).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

#: the ShapeResult fields this module fills
FIELDS = ("comm_bytes_per_token", "comm_seconds_per_token", "comm_fraction", "predicted_comm_bytes_per_token",
          "predicted_comm_seconds_per_token", "comm_nproc", "comm_tp", "comm_parallel")


def run_comm(data: dict) -> dict[str, Any]:
    """The per-token communication of one stored run (`FIELDS`, None where the run has none)."""
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    comm = data.get("comm") or {}
    kinds = comm.get("kinds") or {}
    per_step = comm.get("tokens_per_step")
    if not kinds or not per_step:
        return out
    rows = list(kinds.values())
    predicted_s = [k.get("predicted_seconds") for k in rows]
    out |= {
        "comm_bytes_per_token": sum(k.get("bytes", 0) for k in rows) / per_step,
        "comm_seconds_per_token": sum(k.get("seconds", 0.0) for k in rows) / per_step,
        "comm_fraction": data.get("comm_fraction"),
        "predicted_comm_bytes_per_token": sum(k.get("predicted_bytes", 0) for k in rows) / per_step,
        "predicted_comm_seconds_per_token": (sum(predicted_s) / per_step
                                             if all(s is not None for s in predicted_s) else None),
        "comm_nproc": comm.get("nproc"), "comm_tp": comm.get("tp"), "comm_parallel": comm.get("parallel"),
    }
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(values) if values else None


def comm_columns(datas: list[dict]) -> dict[str, Any]:
    """The communication fields of a shape from its seeds' stored results: means over the runs that have
    each number; the layout (nproc, tp, parallel) of the first run that has one."""
    runs = [run_comm(d) for d in datas]
    out: dict[str, Any] = {k: _mean(r[k] for r in runs) for k in FIELDS[:5]}
    for k in FIELDS[5:]:
        out[k] = next((r[k] for r in runs if r[k] is not None), None)
    return out


__all__ = ["FIELDS", "comm_columns", "run_comm"]
