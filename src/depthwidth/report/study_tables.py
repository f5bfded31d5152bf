"""The comparison table of a study: one row per (budget group, shape), raw values plus their text.

`comparison(study, targets=...)` returns a `Comparison` (columns and rows of raw values) of the study's
`ShapeResult`s, which the HTML page, report.md and results.csv all render, so they always agree. Column
keys are stable and are the CSV header; values are written with `depthwidth.present.units`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from depthwidth.data.probes import DENSE_PROBES
from depthwidth.present.units import count, duration, flops, nbytes, number, percent, ratio
from depthwidth.report.rows import StudyData
from depthwidth.report.targets import TargetEstimate
from depthwidth.study.summary import ShapeResult


def _g(digits: int) -> Callable[[Any], str]:
    return lambda v: f"{v:.{digits}g}"


def _f(digits: int) -> Callable[[Any], str]:
    return lambda v: f"{v:.{digits}f}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Column:
    key: str
    title: str
    fmt: Callable[[Any], str] = str
    note: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]  # key -> raw value (None when not measured)
    hardware: str

    def text(self, row: dict[str, Any], key: str) -> str:
        col = next(c for c in self.columns if c.key == key)
        value = row.get(key)
        if value is None or value == "":
            return "-"
        return col.fmt(value)

    def section(self, keys: tuple[str, ...]) -> tuple[Column, ...]:
        """The columns of `keys` in table order; the slice-loss columns go with "val_loss"."""
        return tuple(c for c in self.columns
                     if c.key in keys or (c.key.startswith(("slice:", "probe:")) and "val_loss" in keys))

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "columns": [{"key": c.key, "title": c.title, "note": c.note}
                                                       for c in self.columns], "rows": [dict(r) for r in self.rows]}


def comparison(study: StudyData, *, targets: dict[str, TargetEstimate], hardware: str) -> Comparison:
    """The table for `study`, with the target-hardware estimates `targets` (keyed by ShapeResult.key)."""
    slices = sorted({k for r in study.results for k in r.slice_losses})
    probes = sorted({(p, d) for r in study.results for p, by in r.probe_accuracy.items() for d in by},
                    key=lambda pd: (pd[0], int(pd[1])))
    comm = any(r.comm_bytes_per_token is not None for r in study.results)
    inspect = any(r.effective_depth is not None for r in study.results)
    adapted = any(r.lr_adapted for r in study.results)
    columns = [
        Column(key="group", title="budget"),
        Column(key="shape", title="shape"),
        Column(key="n_layers", title="L"),
        Column(key="d_model", title="d_model"),
        Column(key="params", title="params", fmt=count),
        Column(key="non_embedding_params", title="non-emb params", fmt=count),
        Column(key="aspect_ratio", title="d/L", fmt=_f(1)),
        Column(key="train_flops_per_token", title="train FLOPs/token", fmt=flops),
        Column(key="best_lr", title="best LR", fmt=_g(3)),
        Column(key="val_loss", title="val loss", fmt=_f(4), note="mean over seeds at the best LR"),
        Column(key="val_loss_std", title="± (seeds)", fmt=_f(4), note="standard deviation over seeds"),
        Column(key="n_seeds", title="seeds"),
        *(ADAPT_TABLE if adapted else ()),
        Column(key="bigram_gain", title="below bigram", fmt=lambda v: f"{v:+.3f}",
               note="nats below the validation split's bigram baseline (positive: learned more than a bigram table)"),
        Column(key="learned", title="learned", fmt=lambda v: "yes" if v else "no",
               note="below the bigram baseline (study.validity); a 'no' is left out of rankings, fits and the "
                    "recommendation"),
        Column(key="unigram_baseline", title="unigram baseline", fmt=_f(4),
               note="validation cross-entropy of the training split's unigram counts (add-one smoothing)"),
        Column(key="bigram_baseline", title="bigram baseline", fmt=_f(4),
               note="validation cross-entropy of the training split's bigram counts (add-one smoothing)"),
        *[Column(key=f"slice:{s}", title=f"loss {s}", fmt=_f(4)) for s in slices],
        *[Column(key=f"probe:{p}:{d}", title=f"{p} k={d} err", fmt=_f(3),
                 note=f"token error on held-out {p} rows at k={d} (1 - token accuracy), mean over seeds")
          if p in DENSE_PROBES else
          Column(key=f"probe:{p}:{d}", title=f"{p} {d} acc", fmt=lambda v: percent(v, digits=0),
                 note=f"exact-match accuracy on held-out {p} examples at difficulty {d}") for p, d in probes],
        Column(key="tokens_per_s", title="train tok/s", fmt=number),
        Column(key="mfu", title="MFU", fmt=percent),
        Column(key="peak_memory_bytes", title="peak train mem", fmt=nbytes),
        *(COMM_TABLE if comm else ()),
        *(INSPECT_TABLE if inspect else ()),
        Column(key="measured_prefill_ms", title="prefill ms (measured)", fmt=number),
        Column(key="measured_decode_ms", title="decode ms (measured)", fmt=number),
        Column(key="bench_ratio", title="measured/pred", fmt=ratio,
               note="decode, against the roofline for the machine it ran on"),
        Column(key="target_prefill_ms", title=f"prefill ms ({hardware})", fmt=number),
        Column(key="target_decode_ms", title=f"decode ms ({hardware})", fmt=number),
        Column(key="target_source", title="source"),
        Column(key="int8_loss_change", title="int8 Δloss", fmt=lambda v: f"{v:+.4f}"),
        Column(key="lr_edge", title="LR at grid edge", note="the best LR is the lowest or highest tried"),
        Column(key="lr_search", title="LR chosen by",
               note="grid, bracket (own search, bracketed or not) or transfer (the LR of another shape)"),
        Column(key="lr_optimum", title="LR optimum (interp.)", fmt=lambda v: f"{v:.3g}",
               note="vertex of the parabola in log LR through the best trial and its neighbours"),
        Column(key="parametrization", title="parametrization"),
        Column(key="warnings", title="protocol warnings"),
    ]
    rows = []
    for r in study.results:
        t = targets.get(r.key)
        rows.append(_row(r, t, slices, comm=comm) | _baseline_cells(r, study.baselines)
                    | {f"probe:{p}:{d}": _probe_value(r, p, d) for p, d in probes}
                    | ({c.key: getattr(r, c.key) for c in INSPECT_TABLE} if inspect else {})
                    | ({c.key: getattr(r, c.key) for c in ADAPT_TABLE} if adapted else {}))
    return Comparison(columns=tuple(columns), rows=tuple(rows), hardware=hardware)


def _baseline_cells(r: ShapeResult, baselines) -> dict[str, Any]:
    return {"bigram_gain": r.bigram_gain, "learned": r.learned,
            "unigram_baseline": None if baselines is None else baselines.unigram,
            "bigram_baseline": None if baselines is None else baselines.bigram}


def _probe_value(r: ShapeResult, probe: str, difficulty: str) -> float | None:
    """Exact-match accuracy, or token error for a dense-target probe."""
    value = r.probe_accuracy.get(probe, {}).get(difficulty)
    if value is None:
        return None
    return 1.0 - value if probe in DENSE_PROBES else value


def _row(r: ShapeResult, t: TargetEstimate | None, slices: list[str], *, comm: bool = False) -> dict[str, Any]:
    bench_ratio = None
    if r.measured_decode_ms and r.bench_predicted_decode_ms:
        bench_ratio = r.measured_decode_ms / r.bench_predicted_decode_ms
    source = ""
    if t is not None:
        source = (t.decode_source if t.decode_source == t.prefill_source
                  else f"{t.decode_source}; prefill {t.prefill_source}")
    return {
        "group": r.group, "shape": r.shape_label, "n_layers": r.n_layers, "d_model": r.d_model, "params": r.params,
        "non_embedding_params": r.non_embedding_params, "aspect_ratio": r.aspect_ratio,
        "train_flops_per_token": r.train_flops_per_token, "best_lr": r.best_lr, "val_loss": r.val_loss,
        "val_loss_std": r.val_loss_std, "n_seeds": r.n_seeds,
        **{f"slice:{s}": r.slice_losses.get(s) for s in slices},
        "tokens_per_s": r.tokens_per_s, "mfu": r.mfu, "peak_memory_bytes": r.peak_memory_bytes,
        "measured_prefill_ms": r.measured_prefill_ms, "measured_decode_ms": r.measured_decode_ms,
        "bench_ratio": bench_ratio,
        "target_prefill_ms": None if t is None else t.prefill_ms,
        "target_decode_ms": None if t is None else t.decode_ms,
        "target_source": source,
        "int8_loss_change": r.int8_loss_change,
        "lr_edge": r.lr_edge or "",
        "lr_search": _lr_search(r), "lr_optimum": r.lr_optimum, "parametrization": r.parametrization,
        "warnings": r.warning or "",
    } | (_comm(r) if comm else {})


def _comm(r: ShapeResult) -> dict[str, Any]:
    return {c.key: getattr(r, c.key) for c in COMM_TABLE if c.key != "comm_layout"} | {"comm_layout": _layout(r)}


def _layout(r: ShapeResult) -> str:
    """'2 processes, tp 2' / '2 processes, ddp'; '' for one process."""
    if r.comm_nproc is None:
        return ""
    how = f"tp {r.comm_tp}" if (r.comm_tp or 1) > 1 else (r.comm_parallel or "")
    if (r.comm_tp or 1) > 1 and r.comm_nproc > r.comm_tp:
        how += f" x {r.comm_parallel} {r.comm_nproc // r.comm_tp}"
    return f"{r.comm_nproc} processes, {how}"


def _lr_search(r: ShapeResult) -> str:
    if r.lr_mode == "transfer" and r.lr_transfer_from not in (None, r.shape_label):
        return f"transfer from {r.lr_transfer_from}"
    if r.lr_mode == "grid":
        return "grid"
    return "search, bracketed" if r.lr_bracketed else "search, not bracketed"


#: communication columns, in the table only when some run measured its communication (several processes)
COMM_TABLE = (
    Column(key="comm_layout", title="processes"),
    Column(key="comm_bytes_per_token", title="comm bytes/token", fmt=nbytes,
           note="measured: the bytes one rank sends in all collectives of a step, over the step's tokens"),
    Column(key="predicted_comm_bytes_per_token", title="predicted bytes/token", fmt=nbytes,
           note="analytic bytes (depthwidth.shapes.collectives), exact for DDP, FSDP2 and TP"),
    Column(key="comm_seconds_per_token", title="comm time/token", fmt=duration,
           note="measured: time in collectives per step (waited for at once, an upper bound), over its tokens"),
    Column(key="predicted_comm_seconds_per_token", title="predicted time/token", fmt=duration,
           note="ring model with the link of `depthwidth hw measure --collectives` (empty before it is measured)"),
    Column(key="comm_fraction", title="comm % of step", fmt=percent,
           note="measured communication seconds over step seconds"),
)

#: [inspect] columns (`depthwidth.study.inspections`), in the table only when some shape was inspected
INSPECT_TABLE = (
    Column(key="effective_depth", title="effective depth",
           note="blocks a greedy removal keeps within the tolerance (first seed at the best LR, its validation "
                "windows)"),
    Column(key="inspect_tolerance", title="inspect tolerance", fmt=_g(3), note="nats of loss the removal may give up"),
    Column(key="most_important_block", title="most fragile block",
           note="the block (from 0) whose removal raises the loss most"),
    Column(key="least_important_block", title="least fragile block",
           note="the block (from 0) whose removal raises the loss least"),
    Column(key="inspect_loss", title="inspected loss", fmt=_f(4),
           note="the whole model's loss on the inspected windows"),
)

#: `[lr] verify = "adapt"` columns (`depthwidth.study.verify`), in the table only when some shape was re-tuned:
#: its result (best LR, val loss) is the re-tune's, these the transferred LR's (empty for shapes not re-tuned)
ADAPT_TABLE = (
    Column(key="lr_transferred", title="transferred LR", fmt=_g(3),
           note="the LR transferred from the proxy, before the shape's group was re-tuned"),
    Column(key="transferred_loss", title="transferred loss", fmt=_f(4),
           note="mean over seeds at the transferred LR"),
)

#: the page shows the comparison as two tables: shape and loss, then speed and memory (warnings listed apart)
LOSS_KEYS = ("group", "shape", "n_layers", "d_model", "params", "non_embedding_params", "aspect_ratio",
             "train_flops_per_token", "best_lr", "lr_edge", "lr_search", "lr_optimum", "val_loss", "val_loss_std",
             "n_seeds", "lr_transferred", "transferred_loss", "bigram_gain", "learned", "int8_loss_change",
             "effective_depth", "most_important_block", "least_important_block")
SPEED_KEYS = ("group", "shape", "tokens_per_s", "mfu", "peak_memory_bytes", "measured_prefill_ms",
              "measured_decode_ms", "bench_ratio", "target_prefill_ms", "target_decode_ms", "target_source",
              *(c.key for c in COMM_TABLE))

#: the columns report.md shows (the HTML page and the CSV have all of them)
MARKDOWN_KEYS = ("group", "shape", "n_layers", "d_model", "non_embedding_params", "aspect_ratio", "best_lr",
                 "val_loss", "val_loss_std", "n_seeds", "lr_transferred", "transferred_loss", "bigram_gain",
                 "tokens_per_s", "comm_bytes_per_token", "measured_decode_ms", "target_decode_ms")

__all__ = ["ADAPT_TABLE", "COMM_TABLE", "Column", "Comparison", "INSPECT_TABLE", "LOSS_KEYS", "MARKDOWN_KEYS",
           "SPEED_KEYS", "comparison"]
