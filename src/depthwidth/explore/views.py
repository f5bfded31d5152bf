"""What the page draws, computed from the commands' JSON: the chart's axes, the family table (exact counts),
each member's verdict against the limits, its detail rows and two pinned members side by side.

Every value is read from `plan --json` (a member's record) or `calc --json` (its detail); every text is
written by `depthwidth.present` (the units formatter, the terminal's `calc` tables), so a number on the
page looks as it does in the terminal. The page's JavaScript computes nothing: it places these values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from depthwidth.present.units import count, flops, integer, nbytes, number, percent, ratio
from depthwidth.shapes.evaluate import value_at

#: a key read from a member's `calc --json` detail rather than its `plan --json` record
DETAIL = "detail:"


def _loss(value: float) -> str:
    return f"{value:.4f}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Axis:
    """A y axis of the chart: `family` the key of a member's value (None: the family has none), `study` the
    `ShapeResult` attribute of a study's measured value, `law` the key of a prescription candidate's."""

    key: str
    label: str
    unit: str
    family: str | None
    study: str | None
    law: str | None
    text: Callable[[float], str]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "unit": self.unit, "family": self.family is not None,
                "study": self.study is not None, "law": self.law is not None}


AXES = (
    Axis(key="decode_ms", label="decode latency at batch 1 (ms / token)", unit="ms", family="latency.decode_ms",
         study="measured_decode_ms", law="decode_ms", text=number),
    Axis(key="prefill_ms", label="prefill latency of seq_len tokens at batch 1 (ms)", unit="ms",
         family="latency.prefill_ms", study="measured_prefill_ms", law=None, text=number),
    Axis(key="memory", label="training memory per device (bytes; a study: measured peak)", unit="B",
         family=DETAIL + "memory.total_training_bytes", study="peak_memory_bytes", law=None, text=nbytes),
    Axis(key="train_flops", label="training FLOPs per token", unit="FLOP", family="flops.train_per_token",
         study="train_flops_per_token", law=None, text=flops),
    Axis(key="tokens_per_s", label="decode tokens/s at the batch (a study: measured generation)", unit="tokens/s",
         family="latency.tokens_per_s", study="throughput_tokens_per_s", law=None, text=number),
    Axis(key="kv_cache", label="KV cache per token (bytes)", unit="B", family="memory.kv_cache_bytes_per_token",
         study=None, law=None, text=nbytes),
    Axis(key="loss", label="validation loss, nats / token (a study: mean and seeds; the law at the budget)",
         unit="nats", family=None, study="val_loss", law="loss", text=_loss),
    Axis(key="train_tokens_per_s", label="training tokens/s (a study: measured)", unit="tokens/s", family=None,
         study="tokens_per_s", law=None, text=number),
)
AXIS = {a.key: a for a in AXES}

#: (header, key) of the family table; the "limits" column is the member's verdict
COLUMNS = (
    ("shape", "derived.label"), ("layers", "shape.n_layers"), ("width", "shape.d_model"), ("heads", "shape.n_heads"),
    ("kv heads", "shape.n_kv_heads"), ("d_ff", "shape.d_ff"), ("params", "params.total"),
    ("budget error", "plan.error"), ("non-embedding params", "params.non_embedding"), ("d/L", "derived.aspect_ratio"),
    ("train FLOPs / token", "flops.train_per_token"),
    ("training memory / device", DETAIL + "memory.total_training_bytes"),
    ("KV cache / token", "memory.kv_cache_bytes_per_token"), ("prefill ms", "latency.prefill_ms"),
    ("decode ms / token", "latency.decode_ms"), ("tokens/s at batch", "latency.tokens_per_s"),
)
ISO_COMPUTE_COLUMNS = (("train FLOPs", "plan.train_flops"), ("tokens", "plan.tokens"))


def value_of(member: dict[str, Any], detail: dict[str, Any], key: str) -> Any:
    return value_at(detail, key[len(DETAIL):]) if key.startswith(DETAIL) else value_at(member, key)


def cell_text(key: str, value: Any) -> str:
    """A table cell as the terminal writes it; counts exact."""
    key = key.removeprefix(DETAIL)
    if value is None:
        return "-"
    if key == "derived.label":
        return str(value)
    if key == "plan.error":
        return percent(value, digits=2, sign=True)
    if key.startswith("memory."):
        return nbytes(value)
    if key.startswith("flops.") or key == "plan.train_flops":
        return flops(value)
    if key == "plan.tokens":
        return count(value)
    if key == "derived.aspect_ratio":
        return f"{value:.1f}"
    if key.startswith("latency."):
        return number(value)
    return integer(value)


def verdict(member: dict[str, Any], detail: dict[str, Any], limits: dict[str, float | None]) -> dict[str, Any]:
    """Whether a member meets the limits (decode and prefill ms at batch 1, training memory per device in
    GB of 1e9 bytes), with the reason for each limit it misses."""
    reasons = []
    checks = (("max_decode_ms", "decode", member["latency"]["decode_ms"], 1.0, " ms"),
              ("max_prefill_ms", "prefill", member["latency"]["prefill_ms"], 1.0, " ms"),
              ("max_memory_gb", "memory", detail["memory"]["total_training_bytes"], 1e9, " GB"))
    for name, what, value, scale, unit in checks:
        limit = limits.get(name)
        if limit is not None and value / scale > limit:
            reasons.append(f"{what} {number(value / scale)}{unit} > {limit:g}{unit}")
    given = any(limits.get(name) is not None for name, *_ in checks)
    text = "; ".join(reasons) if reasons else ("meets" if given else "no limit")
    return {"meets": not reasons, "reasons": reasons, "text": text}


def detail_rows(detail: dict[str, Any]) -> list[dict[str, Any]]:
    """The terminal's `calc` tables of a member's detail, as {title, rows: [[what, value, note]]}."""
    from depthwidth.present.calc import summary_tables

    out = []
    for table in summary_tables(detail):
        columns = [list(c.cells) for c in table.columns]
        rows = [[str(cell) for cell in row] for row in zip(*columns)]
        out.append({"title": str(table.title or ""), "rows": rows})
    return out


def family_view(plan: dict[str, Any], details: list[dict[str, Any]], limits: dict[str, float | None]) -> dict:
    """Axes (a value and its text per member), the table and the verdicts of a family."""
    members = plan["members"]
    columns = COLUMNS + (ISO_COMPUTE_COLUMNS if plan["family"]["kind"] == "iso-compute" else ())
    verdicts = [verdict(m, d, limits) for m, d in zip(members, details)]
    rows = []
    for m, d, v in zip(members, details, verdicts):
        cells = []
        for _, key in columns:
            value = value_of(m, d, key)
            cells.append({"key": key, "value": value, "text": cell_text(key, value)})
        cells.append({"key": "limits", "value": v["meets"], "text": v["text"]})
        rows.append({"label": m["derived"]["label"], "pareto": m["plan"]["pareto"], "cells": cells})
    axes = {}
    for axis in AXES:
        if axis.family is None:
            continue
        values = [value_of(m, d, axis.family) for m, d in zip(members, details)]
        axes[axis.key] = {"values": values, "texts": [axis.text(v) for v in values]}
    from depthwidth.present.plan import budget_text

    fam, wl = plan["family"], plan["workload"]
    title = (f"{fam['kind']} family at {budget_text(fam)} (tolerance {percent(fam['tolerance'], digits=0)}), "
             f"depth span {fam['depth_span']:.1f}x, on {plan['hardware']['name']} ({wl['dtype']}, seq {wl['seq_len']}, "
             f"batch {wl['batch']}, tp {wl['tp']}, pp {wl['pp']})")
    return {"title": title, "columns": [{"label": label, "key": key} for label, key in columns]
            + [{"label": "limits", "key": "limits"}],
            "rows": rows, "verdicts": verdicts, "axes": axes, "depths": [m["shape"]["n_layers"] for m in members]}


def pair(view: dict[str, Any], labels: list[str]) -> dict[str, Any] | None:
    """Two members side by side, each quantity of the table with the second's ratio to the first."""
    index = {r["label"]: i for i, r in enumerate(view["rows"])}
    found = [index[label] for label in labels if label in index][:2]
    if len(found) < 2:
        return None
    a, b = (view["rows"][i] for i in found)
    rows = []
    for col, ca, cb in zip(view["columns"], a["cells"], b["cells"]):
        numeric = isinstance(ca["value"], (int, float)) and not isinstance(ca["value"], bool)
        r = cb["value"] / ca["value"] if numeric and ca["value"] and col["key"] != "plan.error" else None
        rows.append({"label": col["label"], "a": ca["text"], "b": cb["text"], "ratio": r,
                     "ratio_text": ratio(r) if r is not None else ""})
    return {"a": a["label"], "b": b["label"], "rows": rows}


__all__ = ["AXES", "AXIS", "Axis", "COLUMNS", "DETAIL", "cell_text", "detail_rows", "family_view", "pair",
           "value_of", "verdict"]
