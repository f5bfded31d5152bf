"""A study at a glance, computed from its store: one `ShapeResult` per (budget group, shape) - its
learning-rate trials, its seeds at the best learning rate aggregated, speed, memory and its bench run's
batch-1 latency - with the learning-rate choices, the fairness verdict and every protocol warning.

`ShapeResult` (`study/shape_result.py`) is the one per-shape result of a study: `study status`, `study
show`, the demo, the report (its tables, plots, fits, CSV/JSON export) and `recommend` all read it.
`summarize` builds it once and judges it against the data's baselines (`study.validity`); the report
adds the curves its plots and noise estimate need (`ShapeResult.curves`, `eval_noise`) with
`dataclasses.replace`. Nothing here prints. The dict forms (`study status --json`,
the report's export) are the generic ones of `depthwidth.serial`, derived values right after the fields
they follow from.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from depthwidth.artifact.config import stored_value
from depthwidth.serial import Serializable, hook
from depthwidth.shapes.flops import flops
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.comm_columns import comm_columns
from depthwidth.study.shape_result import CurveSeries, ShapeResult  # noqa: F401 (re-exported)
from depthwidth.study.fairness import FairnessReport, check_fairness
from depthwidth.study.selection import LRChoice, select_lrs
from depthwidth.data.baselines import NgramBaselines
from depthwidth.study.baselines import study_baselines
from depthwidth.study.store import ResultRecord, RunRecord, Store
from depthwidth.study.validity import validity_lines, with_gates
from depthwidth.study.lr_search import assess
from depthwidth.study.verify import adapt_trial_counts, is_adapt, split_runs, verdict, verification_losses


def _failed_rows(failed: tuple[tuple[str, str, str], ...]) -> list[dict[str, str]]:
    return [{"run_id": run_id, "label": label, "error": error} for run_id, label, error in failed]


def _failed_tuples(rows: list[dict[str, str]]) -> tuple[tuple[str, str, str], ...]:
    return tuple((r["run_id"], r["label"], r["error"]) for r in rows)


@dataclass(frozen=True, kw_only=True, slots=True)
class StudySummary(Serializable):
    name: str
    study_dir: str
    running: bool = field(metadata=hook(followed_by=("complete",)))  # a driver holds the study's lock now
    #: runs of the current spec by status ("interrupted" when running rows are stale)
    counts: dict[str, int] = field(metadata=hook(followed_by=("fair",)))
    fairness: FairnessReport
    rows: tuple[ShapeResult, ...] = field(metadata=hook(key="shapes"))
    choices: tuple[LRChoice, ...] = field(metadata=hook(key="lr_selection"))
    #: (run id, label, error)
    failed: tuple[tuple[str, str, str], ...] = field(metadata=hook(encode=_failed_rows, decode=_failed_tuples))
    warnings: tuple[str, ...]  # protocol warnings: LR at a grid edge, unfair fields, failed runs
    #: the validation split's unigram and bigram cross-entropy (`depthwidth.data.baselines`; None: not known)
    baselines: NgramBaselines | None = None
    #: one line per group with results that did not learn (`depthwidth.study.validity`)
    validity: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return self.counts.get("pending", 0) + self.counts.get("running", 0) + self.counts.get("interrupted", 0) == 0

    @property
    def fair(self) -> bool:
        return self.fairness.fair


def summarize(store: Store, *, running: bool = False) -> StudySummary:
    """Summarise the runs the study's current spec asks for. `running`: whether a driver is live (when
    not, rows still marked running were interrupted and are counted as such)."""
    from depthwidth.study.lr_plan import stored_modes

    runs, checks = split_runs(store.runs())  # verification runs are not results (study.verify)
    results = {r.run_id: r for r in store.results()}
    spec = store.spec()
    modes = stored_modes(spec, runs)
    choices = select_lrs(runs, results, modes=modes, lr=spec.lr)
    fairness = check_fairness(runs + checks, results, modes=modes)  # a re-tune's runs are results (study.verify)
    rows = _with_verification(_rows(runs, results, choices, seq_len=spec.data.seq_len), checks, results)
    rows, inspect_errors = _with_inspections(rows, store, spec)
    baselines = study_baselines(store.dir, spec)
    rows = with_gates(rows, baselines, spec.report)
    validity = validity_lines(rows, baselines, spec.report)
    counts = store.counts()
    if not running and counts["running"]:
        counts["interrupted"] = counts.pop("running")
        counts["running"] = 0
    failed = tuple((r.run_id, _label(r), r.error or "") for r in runs if r.status == "failed")
    warnings = [f"{c.shape_label} ({c.group}): {c.warning}" for c in choices if c.warning]
    warnings += [f"unfair: {f.message}" for f in fairness.findings]
    warnings += [f"{r.shape_label} ({r.group}): transfer check at {_ratio(r)} the transferred LR: {r.lr_verify_note}"
                 for r in rows if r.lr_verify_note]
    warnings += _adapt_notes(rows, checks)
    warnings += [f"failed: {label}: {error}" for _, label, error in failed]
    warnings += [f"inspect failed: {e}" for e in inspect_errors]
    threads = sorted({t for r in runs if r.kind == "train" and r.run_id in results
                      for t in [results[r.run_id].data.get("threads")] if t is not None})
    if len(threads) > 1:
        warnings.append(f"training speed was measured with different thread counts ({', '.join(map(str, threads))}): "
                        "tokens/s and MFU are not comparable across those runs (losses are)")
    warnings += validity
    return StudySummary(name=store.name, study_dir=str(store.dir), running=running, counts=counts, rows=rows,
                        choices=choices, fairness=fairness, failed=failed, warnings=tuple(warnings),
                        baselines=baselines, validity=tuple(validity))


def _with_verification(rows: tuple[ShapeResult, ...], checks: list[RunRecord],
                       results: dict[str, ResultRecord]) -> tuple[ShapeResult, ...]:
    """`rows` with the verification runs of each checked shape (`depthwidth.study.verify`); a shape re-tuned
    by `verify = "adapt"` takes its best LR of the re-tune as its result, the transferred one kept beside it."""
    if not checks:
        return rows
    losses = verification_losses([r for r in checks if not is_adapt(r)], results)
    retuned = {(r.group, r.shape_label) for r in checks if is_adapt(r)}
    out = []
    for row in rows:
        trials = losses.get((row.group, row.shape_label))
        if trials and row.best_lr is not None:
            means = {lr: (statistics.fmean(v) if all(x is not None and math.isfinite(x) for x in v) else None)
                     for lr, v in sorted(trials.items())}
            row = replace(row, lr_verify=means, lr_verify_note=verdict(row.best_lr, list(row.seed_losses), trials))
        if (row.group, row.shape_label) in retuned and row.best_lr is not None:
            row = _retuned(row, [r for r in checks if (r.group, r.shape_label) == (row.group, row.shape_label)],
                           results)
        out.append(row)
    return tuple(out)


def _retuned(row: ShapeResult, checks: list[RunRecord], results: dict[str, ResultRecord]) -> ShapeResult:
    """`row` (at its transferred LR) with the best LR of its re-tune: every LR its verification and re-tuning
    runs tried, finished at every seed, mean loss over seeds, lowest wins (a tie keeps the transferred)."""
    by_lr: dict[float, list[RunRecord]] = {}
    for r in sorted(checks, key=lambda r: (r.lr, r.seed or 0)):
        by_lr.setdefault(r.lr, []).append(r)
    lr_losses, done = dict(row.lr_losses), {}
    for lr, runs in by_lr.items():
        res = [results.get(r.run_id) for r in runs]
        ok = all(r.status == "completed" and x is not None and x.val_loss is not None and math.isfinite(x.val_loss)
                 for r, x in zip(runs, res))
        lr_losses[lr] = statistics.fmean(x.val_loss for x in res) if ok else None
        if ok:
            done[lr] = (runs, res)
    kept = replace(row, lr_adapted=True, lr_transferred=row.best_lr, transferred_losses=row.seed_losses,
                   lr_losses=dict(sorted(lr_losses.items())))
    base = statistics.fmean(row.seed_losses) if row.seed_losses else math.inf
    scored = {lr: v for lr, v in lr_losses.items() if v is not None}
    if row.seed_losses:
        scored[row.best_lr] = base
    a = assess(scored)
    if not done or a.best_lr not in done or not lr_losses[a.best_lr] < base:
        return replace(kept, lr_edge=a.edge, lr_bracketed=a.bracketed, lr_optimum=a.optimum_lr)
    runs, best = done[a.best_lr]
    probes = [r.data.get("probe_accuracy") or {} for r in best]
    return replace(
        kept, best_lr=a.best_lr, best_run_ids=tuple(r.run_id for r in runs),
        seed_losses=tuple(r.val_loss for r in best), lr_edge=a.edge, lr_bracketed=a.bracketed,
        lr_optimum=a.optimum_lr, slice_losses=_means([r.data.get("val_loss_by_slice") or {} for r in best]),
        probe_accuracy={p: _means([by.get(p, {}) for by in probes], order=int)
                        for p in sorted({p for by in probes for p in by})},
        tokens=best[0].tokens, tokens_per_s=_mean(r.tokens_per_s for r in best), mfu=_mean(r.mfu for r in best),
        peak_memory_bytes=_mean(r.peak_memory_bytes for r in best), **comm_columns([r.data for r in best]))


def _adapt_notes(rows: tuple[ShapeResult, ...], checks: list[RunRecord]) -> list[str]:
    """One protocol note per re-tuned group: its transferred LR and each shape's re-tuned LR and loss."""
    budgets = adapt_trial_counts(checks)
    groups: dict[str, list[ShapeResult]] = {}
    for r in rows:
        if r.lr_adapted:
            groups.setdefault(r.group, []).append(r)
    out = []
    for group, members in groups.items():
        trials = max((b for _, b in budgets.get(group, {}).values()), default=0)
        parts = []
        for r in members:
            if r.val_loss is None or r.transferred_loss is None:
                parts.append(f"{r.shape_label} not finished")
            elif r.best_lr == r.lr_transferred:
                parts.append(f"{r.shape_label} kept {r.best_lr:.3g} (loss {r.val_loss:.3f})")
            else:
                parts.append(f"{r.shape_label} {r.best_lr:.3g} (loss {r.val_loss:.3f} vs {r.transferred_loss:.3f} "
                             "transferred)")
        lrs = sorted({r.lr_transferred for r in members if r.lr_transferred is not None})
        out.append(f"{group}: the transferred LR {', '.join(f'{v:.3g}' for v in lrs)} was re-tuned per shape "
                   f"({trials} extra trials each): " + ", ".join(parts))
    return out


def _with_inspections(rows: tuple[ShapeResult, ...], store: Store, spec) -> tuple[tuple[ShapeResult, ...], list[str]]:
    """`rows` with the inspection of their first completed best run (the latest of the spec's [inspect]
    settings; of any settings without the table), and a line per shape whose inspection only failed."""
    want = spec.inspect.settings() if spec.inspect is not None else None
    done, errors = {}, {}
    for r in store.inspections():  # oldest first: a later one replaces an earlier one
        if r.status == "completed" and r.data is not None and (want is None or r.settings == want):
            done[r.run_id] = {"run_id": r.run_id, **r.data}
        elif r.status == "failed":
            errors[r.run_id] = r.error or ""
    out, failed = [], []
    for row in rows:
        run_id = next((i for i in row.best_run_ids if i in done or i in errors), None)
        if run_id in done:
            data = done[run_id]
            drop = data.get("drop_increase") or [0.0]
            row = replace(row, effective_depth=data.get("effective_depth"), inspect_tolerance=data.get("tolerance"),
                          inspect_loss=data.get("loss"), inspection=data,
                          most_important_block=max(range(len(drop)), key=lambda i: drop[i]),
                          least_important_block=min(range(len(drop)), key=lambda i: drop[i]))
        elif run_id is not None:
            failed.append(f"{row.shape_label} ({row.group}): {errors[run_id]}")
        out.append(row)
    return tuple(out), failed


def _ratio(row: ShapeResult) -> str:
    """The verification LRs of `row` as multiples of its transferred LR ("x0.5 and x2")."""
    transferred = row.lr_transferred if row.lr_transferred is not None else row.best_lr
    parts = [f"x{lr / transferred:.3g}" for lr in row.lr_verify]
    return " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _label(run) -> str:
    return f"{run.shape_label} bench" if run.kind == "bench" else f"{run.shape_label} lr={run.lr:.3g} seed={run.seed}"


def _rows(runs: list[RunRecord], results: dict[str, ResultRecord], choices: tuple[LRChoice, ...], *,
          seq_len: int | None) -> tuple[ShapeResult, ...]:
    """One result per LR choice; without training runs (a bench-only view) one per shape."""
    by_id = {r.run_id: r for r in runs}
    bench: dict[str, dict] = {}
    shapes: dict[tuple[str, str], Shape] = {}
    for run in runs:
        shapes.setdefault((run.group, run.shape_label), Shape.from_dict(run.config["shape"]))
        if run.kind == "bench" and run.status == "completed" and run.run_id in results:
            bench.setdefault(run.shape_label, results[run.run_id].data)
    if choices:
        return tuple(_shape_result(shapes[(c.group, c.shape_label)], group=c.group, choice=c, by_id=by_id,
                                   results=results, bench=bench.get(c.shape_label), seq_len=seq_len) for c in choices)
    return tuple(_shape_result(shape, group=group, choice=None, by_id=by_id, results=results, bench=bench.get(label),
                               seq_len=seq_len) for (group, label), shape in shapes.items())


def _mean(values) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(values) if values else None


def _means(dicts: list[dict], *, order=None) -> dict[str, float]:
    """Per key (sorted by `order`), the mean over the dicts that hold a finite value for it."""
    means = {k: _mean(d.get(k) for d in dicts) for k in sorted({k for d in dicts for k in d}, key=order)}
    return {k: v for k, v in means.items() if v is not None}


def _shape_result(shape: Shape, *, group: str, choice: LRChoice | None, by_id: dict[str, RunRecord],
                  results: dict[str, ResultRecord], bench: dict | None, seq_len: int | None) -> ShapeResult:
    run_ids = choice.best_run_ids if choice else ()
    best = [results[i] for i in run_ids if i in results and by_id[i].status == "completed"]
    probes = [r.data.get("probe_accuracy") or {} for r in best]
    counts = count_params(shape)
    return ShapeResult(
        group=group, shape_label=shape.label(), shape=shape, params=counts.total,
        non_embedding_params=counts.non_embedding,
        train_flops_per_token=flops(shape, seq_len=seq_len or shape.max_seq_len).train_per_token,
        lr_losses=choice.lr_losses if choice else {}, best_lr=choice.best_lr if choice else None,
        best_run_ids=tuple(run_ids), lr_edge=choice.edge if choice else None,
        warning=choice.warning if choice else None, **_lr_fields(choice),
        parametrization=stored_value(next((by_id[i].config.get("train") or {} for i in run_ids if i in by_id), {}),
                                     "parametrization"),
        seed_losses=tuple(r.val_loss for r in best if r.val_loss is not None and math.isfinite(r.val_loss)),
        slice_losses=_means([r.data.get("val_loss_by_slice") or {} for r in best]),
        probe_accuracy={p: _means([by.get(p, {}) for by in probes], order=int)
                        for p in sorted({p for by in probes for p in by})},
        tokens=best[0].tokens if best else None, tokens_per_s=_mean(r.tokens_per_s for r in best),
        mfu=_mean(r.mfu for r in best), peak_memory_bytes=_mean(r.peak_memory_bytes for r in best),
        **comm_columns([r.data for r in best]), **_bench_headline(bench),
    )


def _lr_fields(choice: LRChoice | None) -> dict:
    if choice is None:
        return {}
    return {"lr_mode": choice.mode, "lr_optimum": choice.optimum_lr, "lr_bracketed": choice.bracketed,
            "lr_transfer_from": choice.transfer_from, "lr_max_trials": choice.max_trials}


def _bench_headline(data: dict | None) -> dict:
    """The batch-1 latency, throughput, int8 and hardware fields of `ShapeResult` from a bench result."""
    if not data:
        return {}
    out: dict[str, Any] = {"bench_hardware": (data.get("hardware") or {}).get("name"),
                           "bench_device": (data.get("environment") or {}).get("device", "cpu"),
                           "int8_loss_change": (data.get("quantization") or {}).get("val_loss_change")}
    variant = data.get("config", {}).get("dtype", "fp32")
    for kind, length in (("prefill", "bench_prompt_len"), ("decode", "bench_context")):
        points = [p for p in data.get("latency", []) if p["kind"] == kind and p["batch"] == 1
                  and p["variant"] == variant]
        if points:
            first = min(points, key=lambda p: p["tokens"])
            out[f"measured_{kind}_ms"] = first["seconds"]["median"] * 1e3
            out[f"bench_predicted_{kind}_ms"] = first["predicted_s"] * 1e3
            out[length] = first["tokens"]
    tput = [p for p in data.get("throughput", []) if p["variant"] == variant]
    if tput:
        top = max(tput, key=lambda p: p["batch"])
        out["throughput_tokens_per_s"], out["throughput_batch"] = top["tokens_per_s"], top["batch"]
    return out


__all__ = ["CurveSeries", "ShapeResult", "StudySummary", "summarize"]
