"""A study at a glance, computed from its store: one row per shape (its best learning rate, loss, speed,
memory and batch-1 latency), the learning-rate choices, the fairness verdict and every protocol warning.
`study status`, `study show`, the demo and reports read this; nothing here prints.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.fairness import FairnessReport, check_fairness
from depthwidth.study.selection import LRChoice, select_lrs
from depthwidth.study.store import Store


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeRow:
    group: str
    shape_label: str
    n_layers: int
    d_model: int
    n_heads: int
    params: int
    non_embedding_params: int
    aspect_ratio: float  # d_model / n_layers
    lr_trials: int
    best_lr: float | None
    val_loss: float | None  # best trial, mean over seeds
    val_loss_by_slice: dict | None  # best trial, first seed
    tokens: int | None  # trained tokens of the best run
    tokens_per_s: float | None
    mfu: float | None
    peak_memory_bytes: int | None
    prefill_ms: float | None  # batch 1, the first prompt length of the bench settings
    prefill_predicted_ms: float | None
    prefill_tokens: int | None
    decode_ms: float | None  # batch 1, one token with the first context length cached
    decode_predicted_ms: float | None
    decode_context: int | None
    throughput_tokens_per_s: float | None  # generation at the largest batch measured
    throughput_batch: int | None
    warning: str | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class StudySummary:
    name: str
    study_dir: str
    running: bool  # a driver holds the study's lock now
    counts: dict[str, int]  # runs of the current spec by status ("interrupted" when running rows are stale)
    rows: tuple[ShapeRow, ...]
    choices: tuple[LRChoice, ...]
    fairness: FairnessReport
    failed: tuple[tuple[str, str, str], ...]  # (run id, label, error)
    warnings: tuple[str, ...]  # protocol warnings: LR at a grid edge, unfair fields, failed runs

    @property
    def complete(self) -> bool:
        return self.counts.get("pending", 0) + self.counts.get("running", 0) + self.counts.get("interrupted", 0) == 0

    def to_dict(self) -> dict:
        return {"name": self.name, "study_dir": self.study_dir, "running": self.running, "complete": self.complete,
                "counts": self.counts, "fair": self.fairness.fair, "fairness": self.fairness.to_dict(),
                "shapes": [r.to_dict() for r in self.rows], "lr_selection": [c.to_dict() for c in self.choices],
                "failed": [{"run_id": i, "label": label, "error": e} for i, label, e in self.failed],
                "warnings": list(self.warnings)}


def summarize(store: Store, *, running: bool = False) -> StudySummary:
    """Summarise the runs the study's current spec asks for. `running`: whether a driver is live (when
    not, rows still marked running were interrupted and are counted as such)."""
    runs = store.runs()
    results = {r.run_id: r for r in store.results()}
    choices = select_lrs(runs, results)
    fairness = check_fairness(runs, results)
    bench = {}
    for run in runs:
        if run.kind == "bench" and run.run_id in results:
            bench.setdefault(run.shape_label, results[run.run_id].data)
    shapes = {}
    for run in runs:
        shapes.setdefault(run.shape_label, Shape.from_dict(run.config["shape"]))
    rows = tuple(_row(c, shapes[c.shape_label], results, bench.get(c.shape_label)) for c in choices)
    if not choices:  # a bench-only view still lists its shapes
        rows = tuple(_row(None, s, results, bench.get(label), group=g) for label, s, g in
                     dict.fromkeys((r.shape_label, shapes[r.shape_label], r.group) for r in runs))
    counts = store.counts()
    if not running and counts["running"]:
        counts["interrupted"] = counts.pop("running")
        counts["running"] = 0
    failed = tuple((r.run_id, _label(r), r.error or "") for r in runs if r.status == "failed")
    warnings = [f"{c.shape_label} ({c.group}): {c.warning}" for c in choices if c.warning]
    warnings += [f"unfair: {f.message}" for f in fairness.findings]
    warnings += [f"failed: {label}: {error}" for _, label, error in failed]
    threads = sorted({t for r in runs if r.kind == "train" and r.run_id in results
                      for t in [results[r.run_id].data.get("threads")] if t is not None})
    if len(threads) > 1:
        warnings.append(f"training speed was measured with different thread counts ({', '.join(map(str, threads))}): "
                        "tokens/s and MFU are not comparable across those runs (losses are)")
    return StudySummary(name=store.name, study_dir=str(store.dir), running=running, counts=counts, rows=rows,
                        choices=choices, fairness=fairness, failed=failed, warnings=tuple(warnings))


def _label(run) -> str:
    return f"{run.shape_label} bench" if run.kind == "bench" else f"{run.shape_label} lr={run.lr:.3g} seed={run.seed}"


def _row(choice: LRChoice | None, shape: Shape, results: dict, bench: dict | None, *, group: str = "") -> ShapeRow:
    p = count_params(shape)
    best = results.get(choice.best_run_ids[0]) if choice and choice.best_run_ids else None
    lat = _bench_headline(bench)
    return ShapeRow(
        group=choice.group if choice else group, shape_label=shape.label(), n_layers=shape.n_layers,
        d_model=shape.d_model, n_heads=shape.n_heads, params=p.total, non_embedding_params=p.non_embedding,
        aspect_ratio=shape.aspect_ratio, lr_trials=len(choice.trials) if choice else 0,
        best_lr=choice.best_lr if choice else None, val_loss=choice.best_loss if choice else None,
        val_loss_by_slice=best.data.get("val_loss_by_slice") if best else None,
        tokens=best.tokens if best else None, tokens_per_s=best.tokens_per_s if best else None,
        mfu=best.mfu if best else None, peak_memory_bytes=best.peak_memory_bytes if best else None,
        warning=choice.warning if choice else None, **lat,
    )


def _bench_headline(data: dict | None) -> dict:
    out = dict(prefill_ms=None, prefill_predicted_ms=None, prefill_tokens=None, decode_ms=None,
               decode_predicted_ms=None, decode_context=None, throughput_tokens_per_s=None, throughput_batch=None)
    if not data:
        return out
    variant = data.get("config", {}).get("dtype", "fp32")
    for kind, prefix, key in (("prefill", "prefill", "prefill_tokens"), ("decode", "decode", "decode_context")):
        points = [p for p in data.get("latency", []) if p["kind"] == kind and p["batch"] == 1
                  and p["variant"] == variant]
        if points:
            first = min(points, key=lambda p: p["tokens"])
            out[f"{prefix}_ms"] = first["seconds"]["median"] * 1e3
            out[f"{prefix}_predicted_ms"] = first["predicted_s"] * 1e3
            out[key] = first["tokens"]
    tput = [p for p in data.get("throughput", []) if p["variant"] == variant]
    if tput:
        top = max(tput, key=lambda p: p["batch"])
        out["throughput_tokens_per_s"], out["throughput_batch"] = top["tokens_per_s"], top["batch"]
    return out


__all__ = ["ShapeRow", "StudySummary", "summarize"]
