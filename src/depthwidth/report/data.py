"""Load a study from its store into the report's typed rows: the one adapter between `study/` and `report/`.

Learning-rate selection, the fairness check and the protocol warnings are the study's own
(`depthwidth.study.summarize`: `select_lrs`, `check_fairness`); this module only gathers, per selected
(group, shape), the seeds' losses at the best learning rate, their slice losses, speeds, memory, curves
and the group's bench measurement, and lists every run with its status and error.
"""

from __future__ import annotations

import math
import os
import statistics
from pathlib import Path

from depthwidth.report.noise import curve_tail_noise
from depthwidth.report.rows import CurveSeries, Protocol, RunSummary, ShapeResult, StudyData
from depthwidth.shapes.flops import flops
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape


def load_study(study_dir: str | os.PathLike) -> StudyData:
    """Read the study in `study_dir` (FileNotFoundError when it holds none, ValueError when unreadable)."""
    from depthwidth.study import Store, summarize
    from depthwidth.study.runner import is_running

    folder = Path(study_dir)
    with Store.open(folder) as store:
        summary = summarize(store, running=is_running(folder))
        runs = store.runs()
        results = {r.run_id: r for r in store.results()}
        spec = store.spec()
        spec_text = store.spec_text()
        curves = {run_id: store.curves(run_id) for c in summary.choices for run_id in _best_ids(c)}
        name = store.name

    by_id = {r.run_id: r for r in runs}
    bench = {}
    for run in runs:
        if run.kind == "bench" and run.run_id in results and run.status == "completed":
            bench.setdefault(run.shape_label, results[run.run_id].data)
    shapes = {}
    for run in runs:
        shapes.setdefault((run.group, run.shape_label), Shape.from_dict(run.config["shape"]))

    seq_len = spec.data.seq_len
    shape_results = []
    for choice, row in zip(summary.choices, summary.rows):
        shape = shapes[(choice.group, choice.shape_label)]
        shape_results.append(_shape_result(choice, row, shape=shape, by_id=by_id, results=results, curves=curves,
                                           bench=bench.get(choice.shape_label), seq_len=seq_len or shape.max_seq_len))
    run_rows = tuple(_run_summary(r, results.get(r.run_id)) for r in runs)
    protocol = _protocol(spec, runs, results, summary)
    notes = tuple(summary.warnings)
    bench_hw = next((b.get("hardware") for b in bench.values() if b.get("hardware")), None)
    return StudyData(name=name, description=spec.description, folder=str(folder), spec=spec.to_dict(),
                     spec_text=spec_text, protocol=protocol, results=tuple(shape_results), runs=run_rows,
                     notes=notes, bench_hardware=bench_hw)


def _best_ids(choice) -> tuple[str, ...]:
    return tuple(choice.best_run_ids)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.fmean(values) if values else None


def _shape_result(choice, row, *, shape, by_id, results, curves, bench, seq_len) -> ShapeResult:
    best = [results[i] for i in choice.best_run_ids if i in results and by_id[i].status == "completed"]
    seed_losses = tuple(r.val_loss for r in best if r.val_loss is not None and math.isfinite(r.val_loss))
    slice_names = sorted({k for r in best for k in (r.data.get("val_loss_by_slice") or {})})
    slices = {k: _mean((r.data.get("val_loss_by_slice") or {}).get(k) for r in best) for k in slice_names}
    probes: dict[str, dict[str, float]] = {}
    for r in best:
        for probe, by_difficulty in (r.data.get("probe_accuracy") or {}).items():
            for d in by_difficulty:
                probes.setdefault(probe, {})[d] = _mean((b.data.get("probe_accuracy") or {}).get(probe, {}).get(d)
                                                        for b in best)
    series = []
    for run_id in choice.best_run_ids:
        pts = [p for p in curves.get(run_id, []) if p.val_loss is not None and p.tokens is not None]
        train = [p for p in curves.get(run_id, []) if p.train_loss is not None and p.tokens is not None
                 and math.isfinite(p.train_loss)]
        if pts or train:
            series.append(CurveSeries(seed=by_id[run_id].seed or 0, tokens=tuple(float(p.tokens) for p in pts),
                                      val_loss=tuple(float(p.val_loss) for p in pts),
                                      train_tokens=tuple(float(p.tokens) for p in train),
                                      train_loss=tuple(float(p.train_loss) for p in train)))
    noise_parts = [curve_tail_noise(s.tokens, s.val_loss) for s in series]
    noise_parts = [p for p in noise_parts if p is not None]
    eval_noise = (math.sqrt(sum(p[0] for p in noise_parts) / sum(p[1] for p in noise_parts))
                  if noise_parts and sum(p[1] for p in noise_parts) else None)
    counts = count_params(shape)
    lr_losses = {t.lr: (t.mean_loss if t.mean_loss is not None and math.isfinite(t.mean_loss) else None)
                 for t in choice.trials}
    tokens = row.tokens or (by_id[choice.trials[0].run_ids[0]].config.get("train", {}).get("tokens")
                            if choice.trials and choice.trials[0].run_ids else 0)
    quant = (bench or {}).get("quantization") or {}
    return ShapeResult(
        group=choice.group, label=choice.shape_label, shape=shape, params=counts.total,
        non_embedding_params=counts.non_embedding,
        train_flops_per_token=flops(shape, seq_len=seq_len).train_per_token, tokens=int(tokens or 0),
        lr_grid=tuple(t.lr for t in choice.trials), lr_losses=lr_losses, best_lr=choice.best_lr,
        seed_losses=seed_losses, slice_losses={k: v for k, v in slices.items() if v is not None},
        tokens_per_s=_mean(r.tokens_per_s for r in best), mfu=_mean(r.mfu for r in best),
        peak_memory_bytes=_mean(r.peak_memory_bytes for r in best),
        measured_prefill_ms=row.prefill_ms, measured_decode_ms=row.decode_ms,
        bench_predicted_prefill_ms=row.prefill_predicted_ms, bench_predicted_decode_ms=row.decode_predicted_ms,
        bench_hardware=((bench or {}).get("hardware") or {}).get("name") if bench else None,
        bench_prompt_len=row.prefill_tokens, bench_context=row.decode_context,
        int8_loss_change=quant.get("val_loss_change"), curves=tuple(series), eval_noise=eval_noise,
        lr_edge=choice.edge, warnings=(choice.warning,) if choice.warning else (),
        probe_accuracy={p: {d: v for d, v in sorted(by.items(), key=lambda kv: int(kv[0])) if v is not None}
                        for p, by in sorted(probes.items())},
    )


def _run_summary(run, result) -> RunSummary:
    data = result.data if result is not None else {}
    return RunSummary(run_id=run.run_id, kind=run.kind, group=run.group, label=run.shape_label, lr=run.lr,
                      seed=run.seed, status=run.status, error=run.error or data.get("error"),
                      val_loss=result.val_loss if result is not None else None,
                      diverged_at_step=data.get("diverged_at_step"))


def _protocol(spec: dict, runs, results, summary) -> Protocol:
    data = spec.get("data") or {}
    lr = spec.get("lr") or {}
    if lr.get("grid"):
        grid = "[" + ", ".join(f"{v:.3g}" for v in lr["grid"]) + "] for every shape"
    elif lr.get("centre") is not None:
        grid = (f"centred per width: {lr['centre']:.3g} x (width {lr.get('reference_width')} / d_model)"
                f"^{lr.get('exponent', 1.0):g} x [{', '.join(f'{f:g}' for f in lr.get('factors', ()))}]")
    else:
        grid = "-"
    train_runs = [r for r in runs if r.kind == "train"]
    done = [results[r.run_id] for r in train_runs if r.run_id in results]
    tokens_by_group: dict[str, int] = {}
    for r in train_runs:
        tokens_by_group.setdefault(r.group, (r.config.get("train") or {}).get("tokens"))
    fairness = summary.fairness
    return Protocol(
        corpus=str(data.get("corpus", "")),
        corpus_hashes=tuple(sorted({r.corpus_hash for r in done if r.corpus_hash}
                                   | {(r.config.get("data") or {}).get("corpus_hash") for r in train_runs} - {None})),
        tokenizer=str(data.get("tokenizer", "")), seq_len=int(data.get("seq_len") or 0),
        batch_size=int(data.get("batch_size") or 0), tokens_by_group=tokens_by_group, lr_grid=grid,
        lr_trials=tuple(sorted({r.lr_trials for r in train_runs if r.lr_trials is not None})),
        seeds=tuple(spec.get("seeds") or sorted({r.seed for r in train_runs if r.seed is not None})),
        batch_stream_hashes=tuple(sorted({r.batch_stream_hash for r in done if r.batch_stream_hash})),
        hardware=str(spec.get("hardware", "")), fair=fairness.fair,
        warnings=tuple(f.message for f in fairness.findings),
    )


__all__ = ["load_study"]
