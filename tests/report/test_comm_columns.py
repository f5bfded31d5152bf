"""Communication as columns of a study's per-shape result, its terminal table and its report.

A store written through the study's own API (as fixture_study.py writes one): two shapes of equal
non-embedding parameters (L8-H32 deep-narrow, L2-H64 shallow-wide), two seeds each, every run a 2-process
tensor-parallel (tp = 2) run whose stored result carries `comm` as the trainer writes it
(`train.comm_meter.comm_fields`): the bytes are the analytic ones of `shapes.collectives` (the trainer's
tests hold the metered bytes equal to them), the seconds differ by seed. A single-process study (the
session's fixture study) shows no communication anywhere.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import replace

import numpy as np
import pytest
from fixture_study import _train_result

from depthwidth.shapes.collectives import step_collectives, with_seconds
from depthwidth.shapes.shape import Shape
from depthwidth.study.expand import DataInfo, train_config
from depthwidth.study.jobs import merge_curve
from depthwidth.study.run_config import config_hash
from depthwidth.study.spec import parse_spec
from depthwidth.study.store import Store
from depthwidth.study.summary import summarize

SPEC = """
name = "tp-comm"
hardware = "cpu"
seeds = [0, 1]

[[shape]]
n_layers = 2
d_model = 64
n_heads = 4

[data]
corpus = "shakespeare"
tokenizer = "byte"
seq_len = 64
batch_size = 8

[train]
tokens = 51200

[lr]
grid = [0.003]

[execution]
nproc_per_run = 2
tp = 2
"""
SHAPES = ((8, 32), (2, 64))  # equal non-embedding parameters: 12 L d^2 = 98,304 both
SEQ, BATCH = 64, 8
LINK = {"bandwidth": 2e9, "latency_s": 1e-5}
STEP_S = 0.05


def _measured_seconds(shape: Shape, seed: int) -> float:
    return 1e-4 * shape.n_layers * (1 + 0.2 * seed)


def comm_of(shape: Shape, seed: int, *, link: bool = True) -> dict:
    """`TrainResult.comm` of a 2-process tp = 2 run of `shape`, shaped as comm_fields() writes it."""
    predicted = step_collectives(shape, nproc=2, parallel="ddp", tp=2, batch_size=BATCH, micro_batch=BATCH,
                                 seq_len=SEQ, act_bytes=4)
    calls = {k: c.calls for k, c in predicted.items()}
    if link:
        predicted = with_seconds(predicted, bandwidth=LINK["bandwidth"], latency_s=LINK["latency_s"],
                                 measured_calls=calls)
    kinds = {k: {"calls": float(c.calls), "bytes": float(c.bytes), "seconds": _measured_seconds(shape, seed),
                 "bytes_each_step": [c.bytes], "predicted_calls": c.calls, "predicted_bytes": c.bytes,
                 "predicted_seconds": c.seconds} for k, c in predicted.items()}
    return {"method": "timing", "backend": "gloo", "nproc": 2, "dp": 1, "tp": 2, "parallel": "ddp",
            "tokens_per_step": BATCH * SEQ, "kinds": kinds, "link": LINK if link else None}


@pytest.fixture(scope="module")
def tp_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tp-study")
    spec = parse_spec(SPEC, source="tp.toml")
    data = DataInfo(corpus_hash="c0ffee" * 4, vocab_size=256, train_tokens=1_000_000)
    rows, outcomes = [], []
    for n_layers, d_model in SHAPES:
        shape = Shape(n_layers=n_layers, d_model=d_model, n_heads=d_model // 16, vocab_size=256, max_seq_len=SEQ)
        for seed in spec.seeds:
            config = train_config(spec, data=data, shape=shape, tokens=51200, lr=0.003, seed=seed)
            run_id = config_hash(config)
            rows.append({"run_id": run_id, "kind": "train", "group": "g", "shape_label": shape.label(), "lr": 0.003,
                         "seed": seed, "lr_trials": 1, "config": config})
            result = _train_result(shape, config, status="completed", loss=3.0 + 0.01 * seed, seed=seed,
                                   tokens=51200, rng=np.random.default_rng(seed))
            comm = comm_of(shape, seed)
            secs = sum(k["seconds"] for k in comm["kinds"].values())
            outcomes.append((run_id, replace(result, comm=comm, comm_fraction=secs / STEP_S)))
    with Store.create(folder, name=spec.name, spec=spec.to_dict(), spec_text=spec.text, source=spec.source) as store:
        store.sync_runs(rows)
        for run_id, result in outcomes:
            store.mark_running(run_id, worker="fixture")
            d = result.to_dict()
            curve = merge_curve(d.pop("curve", []), d.get("evals", []), tokens_per_step=BATCH * SEQ)
            store.record_finished(run_id, status="completed", result=d, curve=curve, wall_seconds=1.0)
    return folder


def _rows(folder) -> dict:
    with Store.open(folder) as store:
        return {r.shape_label: r for r in summarize(store).rows}


def test_shape_result_has_the_per_token_communication_over_seeds(tp_study):
    rows = _rows(tp_study)
    assert set(rows) == {"L8-H32-A2", "L2-H64-A4"}
    for label, (n_layers, d_model) in zip(("L8-H32-A2", "L2-H64-A4"), SHAPES, strict=True):
        r = rows[label]
        # tp all-reduces per layer and token: 2 forward + 2 backward (GELU MLP) d_model-vectors of fp32
        assert r.comm_bytes_per_token == r.predicted_comm_bytes_per_token == n_layers * d_model * 4 * 4
        shape = r.shape
        expected_s = statistics.fmean(_measured_seconds(shape, s) for s in (0, 1)) / (BATCH * SEQ)
        assert r.comm_seconds_per_token == pytest.approx(expected_s, rel=1e-12)
        assert r.comm_fraction == pytest.approx(expected_s * BATCH * SEQ / STEP_S, rel=1e-12)
        # ring all-reduce over 2 ranks: 2 x (1/2 x bytes / bw + calls x latency), calls = L x 4 per step
        calls = n_layers * 4
        ring = 2 * (0.5 * r.comm_bytes_per_token * BATCH * SEQ / LINK["bandwidth"] + calls * LINK["latency_s"])
        assert r.predicted_comm_seconds_per_token == pytest.approx(ring / (BATCH * SEQ), rel=1e-12)
        assert (r.comm_nproc, r.comm_tp, r.comm_parallel) == (2, 2, "ddp")
    deep, wide = rows["L8-H32-A2"], rows["L2-H64-A4"]
    assert deep.comm_bytes_per_token / wide.comm_bytes_per_token == 2.0  # L x d_model: 256 against 128
    assert deep.to_dict()["comm_bytes_per_token"] == 4096


def test_no_link_no_predicted_time_and_one_process_runs_add_nothing():
    from depthwidth.study.comm_columns import comm_columns, run_comm

    shape = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=SEQ)
    unlinked = {"comm": comm_of(shape, 0, link=False), "comm_fraction": 0.25}
    one = run_comm(unlinked)
    assert one["comm_bytes_per_token"] == 2 * 64 * 16 and one["predicted_comm_seconds_per_token"] is None
    single = run_comm({"comm": {}, "comm_fraction": None})
    assert all(v is None for v in single.values())  # a 1-process run: nothing, not 0
    mixed = comm_columns([unlinked, {"comm": {}, "comm_fraction": None}])
    assert mixed["comm_bytes_per_token"] == 2048 and mixed["comm_fraction"] == 0.25  # the run that has it


def _terminal(summary) -> str:
    from rich.console import Console

    from depthwidth.present.study import shapes_table

    console = Console(width=400, record=True, file=io.StringIO())
    console.print(shapes_table(summary))
    return console.export_text()


def test_terminal_table_shows_communication_only_when_measured(tp_study, fixture_study):
    with Store.open(tp_study) as store:
        text = _terminal(summarize(store))
    assert "comm/tok" in text and "comm %" in text
    line = next(ln for ln in text.splitlines() if "L8-H32-A2" in ln)
    assert "4 KiB (4 KiB)" in line
    with Store.open(fixture_study[0]) as store:
        summary = summarize(store)
    assert all(r.comm_bytes_per_token is None and r.comm_fraction is None for r in summary.rows)
    assert "comm" not in _terminal(summary)


def test_report_table_csv_json_and_panel(tp_study, tmp_path):
    from depthwidth.report.build import build_report
    from depthwidth.report.comm_plots import NAME
    from depthwidth.report.data import load_study
    from depthwidth.report.export import render_csv, render_markdown
    from depthwidth.report.html import render_html
    from depthwidth.report.study_tradeoff import plot_tradeoffs

    report = build_report(load_study(tp_study), n_bootstrap=10)
    table = {r["shape"]: r for r in report.table.rows}
    assert table["L8-H32-A2"]["comm_bytes_per_token"] == 4096
    assert table["L2-H64-A4"]["predicted_comm_bytes_per_token"] == 2048
    assert table["L8-H32-A2"]["comm_layout"] == "2 processes, tp 2"
    rows = {r["shape"]: r for r in csv.DictReader(io.StringIO(render_csv(report)))}
    assert float(rows["L2-H64-A4"]["comm_bytes_per_token"]) == 2048
    assert math.isclose(float(rows["L8-H32-A2"]["comm_fraction"]), table["L8-H32-A2"]["comm_fraction"])
    figures, skipped = plot_tradeoffs(report.study, tmp_path, hardware="cpu")  # the trade-off pictures' panel
    assert [f.name for f in figures] == ["tradeoff_g", NAME] and not skipped
    assert (tmp_path / f"{NAME}.png").stat().st_size > 1000
    page = render_html(report, figures[1:])
    assert "comm bytes/token" in page and f'id="fig-{NAME}"' in page
    line = next(ln for ln in render_markdown(report, []).splitlines() if ln.startswith("| g | L8-H32-A2"))
    assert "| 4 KiB |" in line


def test_single_process_report_has_no_communication(written_report):
    from depthwidth.report.comm_plots import NAME

    report, files = written_report
    header = files.csv.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert not [h for h in header if "comm" in h]
    assert all("comm_bytes_per_token" not in r for r in report.table.rows)
    assert NAME not in [f.name for f in files.figures]
    assert "comm bytes/token" not in files.html.read_text(encoding="utf-8")
    assert "comm bytes/token" not in files.markdown.read_text(encoding="utf-8")
