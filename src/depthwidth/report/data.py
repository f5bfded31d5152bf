"""Load a study from its store into the report's records: the one adapter between `study/` and `report/`.

The per-shape results, learning-rate selection, fairness check and protocol warnings are the study's
own (`depthwidth.study.summarize`); this module adds to each result the loss curves of its seeds at
the best learning rate (and the one-seed noise estimate they give), and lists every run with its
status and error.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

from depthwidth.report.noise import curve_tail_noise
from depthwidth.report.rows import Protocol, RunSummary, StudyData
from depthwidth.study.summary import CurveSeries, ShapeResult


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
        curves = {run_id: store.curves(run_id) for row in summary.rows for run_id in row.best_run_ids}
        name = store.name

    seeds = {r.run_id: r.seed or 0 for r in runs}
    shape_results = tuple(_with_curves(row, curves, seeds) for row in summary.rows)
    run_rows = tuple(_run_summary(r, results.get(r.run_id)) for r in runs)
    protocol = _protocol(spec, runs, results, summary)
    bench_hw = next((r.data.get("hardware") for run in runs if run.kind == "bench" and run.status == "completed"
                     for r in [results.get(run.run_id)] if r is not None and r.data.get("hardware")), None)
    return StudyData(name=name, description=spec.description, folder=str(folder), spec=spec.to_dict(),
                     spec_text=spec_text, protocol=protocol, results=shape_results, runs=run_rows,
                     notes=tuple(summary.warnings), bench_hardware=bench_hw, baselines=summary.baselines)


def _with_curves(row: ShapeResult, curves: dict, seeds: dict[str, int]) -> ShapeResult:
    """`row` with the curves of its best runs and the noise of their last evaluations."""
    series = []
    for run_id in row.best_run_ids:
        points = curves.get(run_id, [])
        val = [p for p in points if p.val_loss is not None and p.tokens is not None]
        train = [p for p in points if p.train_loss is not None and p.tokens is not None and math.isfinite(p.train_loss)]
        if val or train:
            series.append(CurveSeries(seed=seeds[run_id], tokens=tuple(float(p.tokens) for p in val),
                                      val_loss=tuple(float(p.val_loss) for p in val),
                                      train_tokens=tuple(float(p.tokens) for p in train),
                                      train_loss=tuple(float(p.train_loss) for p in train)))
    parts = [p for p in (curve_tail_noise(s.tokens, s.val_loss) for s in series) if p is not None]
    dof = sum(p[1] for p in parts)
    eval_noise = math.sqrt(sum(p[0] for p in parts) / dof) if dof else None
    return replace(row, curves=tuple(series), eval_noise=eval_noise)


def _run_summary(run, result) -> RunSummary:
    data = result.data if result is not None else {}
    return RunSummary(run_id=run.run_id, kind=run.kind, group=run.group, label=run.shape_label, lr=run.lr,
                      seed=run.seed, status=run.status, error=run.error or data.get("error"),
                      val_loss=result.val_loss if result is not None else None,
                      diverged_at_step=data.get("diverged_at_step"),
                      slice_losses={k: v for k, v in (data.get("val_loss_by_slice") or {}).items() if v is not None},
                      probe_accuracy=data.get("probe_accuracy") or {})


def _protocol(spec, runs, results, summary) -> Protocol:
    """The protocol as the typed spec states it and the stored runs hold it (run configs read through
    `depthwidth.study.run_config`)."""
    from depthwidth.study.lr_plan import stored_modes
    from depthwidth.study.run_config import run_data, run_tokens

    lr = spec.lr
    if lr.grid is not None:
        grid = "[" + ", ".join(f"{v:.3g}" for v in lr.grid) + "] for every shape"
    else:
        grid = (f"centred per width: {lr.centre:.3g} x (width {lr.reference_width} / d_model)"
                f"^{lr.exponent:g} x [{', '.join(f'{f:g}' for f in lr.factors)}]")
    if lr.search == "bracket":
        grid = (f"search from {grid.removesuffix(' for every shape')}, extended x{lr.step or 'grid ratio'} "
                f"beyond an edge and refined, {lr.max_trials} trials per shape at most")
    train_runs = [r for r in runs if r.kind == "train"]
    done = [results[r.run_id] for r in train_runs if r.run_id in results]
    tokens_by_group: dict[str, int] = {}
    for r in train_runs:
        tokens_by_group.setdefault(r.group, run_tokens(r.config))
    fairness = summary.fairness
    modes = stored_modes(spec, runs)
    return Protocol(
        corpus=spec.data.corpus,
        corpus_hashes=tuple(sorted({r.corpus_hash for r in done if r.corpus_hash}
                                   | {run_data(r.config)["corpus_hash"] for r in train_runs})),
        tokenizer=spec.data.tokenizer, seq_len=spec.data.seq_len, batch_size=spec.data.batch_size,
        tokens_by_group=tokens_by_group, lr_grid=grid,
        lr_trials=tuple(sorted({r.lr_trials for r in train_runs if r.lr_trials is not None})),
        seeds=spec.seeds, batch_stream_hashes=tuple(sorted({r.batch_stream_hash for r in done if r.batch_stream_hash})),
        hardware=spec.hardware, fair=fairness.fair, warnings=tuple(f.message for f in fairness.findings),
        parametrizations={g: m.parametrization for g, m in modes.items()},
        lr_search={g: m.describe() for g, m in modes.items()},
    )


__all__ = ["load_study"]
