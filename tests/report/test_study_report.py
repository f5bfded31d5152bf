"""A study folder with one failed and one diverged run still produces a complete report that lists them."""

import csv
import io
import json
import re

import pytest

from depthwidth.report.data import load_study
from fixture_study import DIVERGED, FAILED, GROUPS


def test_load_study_aggregates_seeds_at_the_best_lr(fixture_study):
    folder, losses = fixture_study
    study = load_study(folder)
    assert study.groups == tuple(GROUPS)
    assert len(study.results) == 8
    by_key = {r.key: r for r in study.results}
    r = by_key["P400k/L4-H96-A6"]
    assert r.best_lr == 0.003 and r.n_seeds == 2
    expected = [losses[("P400k", "L4-H96-A6", 0.003, s)] for s in (0, 1)]
    assert r.val_loss == pytest.approx(sum(expected) / 2)
    assert r.measured_decode_ms == pytest.approx((1e-4 + 1.2e-4 * 4 + 2e-9 * r.params) * 1e3)
    assert r.bench_hardware == "cpu" and r.bench_context == 48
    assert len(r.curves) == 2 and r.curves[0].tokens[-1] == 204800
    assert r.probe_accuracy == {"multihop": {"1": pytest.approx(0.8), "2": pytest.approx(0.205)},
                                "recall": {"4": pytest.approx(0.48)}}  # seeds 0 and 1 averaged
    # the diverged trial (lr 0.003, seed 0) makes 0.001 the best LR of L16-H48, at the low edge of the grid
    deep = by_key["P400k/L16-H48-A3"]
    assert deep.best_lr == 0.001 and deep.lr_edge == "low"
    assert deep.lr_losses[0.003] is None and deep.n_seeds == 2
    assert study.protocol.fair and study.protocol.lr_trials == (2,) and study.protocol.seeds == (0, 1)
    assert study.protocol.tokens_by_group == {"P100k": 51200, "P400k": 204800}
    statuses = {(p.group, p.label, p.lr, p.seed): p for p in study.problem_runs}
    assert statuses[FAILED].status == "failed" and "out of memory" in statuses[FAILED].error
    assert statuses[DIVERGED].status == "diverged" and statuses[DIVERGED].diverged_at_step == 41


def test_report_is_complete_and_lists_failed_and_diverged_runs(written_report):
    report, files = written_report
    for path in (files.html, files.markdown, files.csv, files.json):
        assert path.is_file() and path.stat().st_size > 500
    names = {f.name for f in files.figures}
    assert {"basin", "curves", "pareto_latency", "pareto_throughput", "slices", "latency_check", "fits",
            "tradeoff_P100k", "tradeoff_P400k", "probes"} <= names
    for f in files.figures:
        assert f.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f.svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    page = files.html.read_text()
    assert page.count("data:image/png;base64,") == len(files.figures)
    problem = page[page.index('id="problem-runs"'):]
    assert "failed" in problem and "out of memory (synthetic)" in problem
    assert "diverged" in problem and "loss 1e9 at step 41" in problem
    md = files.markdown.read_text()
    assert "failed: train L1-H96-A6" in md and "diverged: train L16-H48-A3" in md and "diverged at step 41" in md
    for section in ("Study and protocol", "Comparison", "Plots", "Trend fits", "Recommendation"):
        assert section in page and section in md
    # protocol summary at the top: corpus hash, tokens, LR grid, seeds, batch-stream hash
    top = page[: page.index('id="table"')]
    for text in ("c0ffeec0ffeec0ffeec0ffee", "204,800", "[0.001, 0.003]", "stream-seed0", "0, 1"):
        assert text in top


def test_page_is_self_contained_and_escaped(written_report):
    _, files = written_report
    page = files.html.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page.lower() and "@import" not in page and "url(" not in page
    # the study's description holds markup: shown as text, never as markup
    assert "synthetic &lt;b&gt;study&lt;/b&gt; &amp; friends" in page
    assert "<b>study</b>" not in page
    assert "synthetic &lt;b&gt;study&lt;/b&gt;" in files.markdown.read_text()


def test_csv_and_json_hold_the_numbers(written_report):
    report, files = written_report
    rows = list(csv.DictReader(io.StringIO(files.csv.read_text())))
    assert len(rows) == 8
    row = next(r for r in rows if r["shape"] == "L4-H96-A6")
    expected = next(r for r in report.study.results if r.key == "P400k/L4-H96-A6").val_loss
    assert float(row["val_loss"]) == pytest.approx(expected)
    assert row["slice:python-docs"] and row["lr_edge"] == "high"
    assert float(row["probe:multihop:1"]) == pytest.approx(0.8) and float(row["probe:recall:4"]) == pytest.approx(0.48)
    data = json.loads(files.json.read_text())
    assert data["recommendation"]["chosen"] == "P400k/L4-H96-A6"
    assert {r["status"] for r in data["study"]["runs"]} == {"completed", "failed", "diverged"}
    assert data["trends"]["supported"] is False  # two scales cannot carry an extrapolation
    assert any("only 2 scales" in w for w in data["trends"]["warnings"])


def test_report_of_an_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no study"):
        load_study(tmp_path)


def test_a_study_where_every_training_run_failed_still_reports(tmp_path):
    from depthwidth.report.build import build_report
    from depthwidth.report.export import write_report
    from fixture_study import build_fixture_study

    build_fixture_study(tmp_path / "study", fail_all=True)
    study = load_study(tmp_path / "study")
    report = build_report(study, n_bootstrap=2)
    files = write_report(report, tmp_path / "out")
    assert report.recommendation.chosen is None and "No completed run" in report.recommendation.verdict
    page = files.html.read_text()
    runs = page[page.index('id="problem-runs"'):]
    assert runs.count("out of memory (synthetic)") == 32  # every training run listed with its error
    assert "no completed runs: nothing to fit" in page
    # what needs no training still shows: the benches' latency and the analytic trade-off pictures
    assert {f.name for f in files.figures} == {"latency_check", "tradeoff_P100k", "tradeoff_P400k"}
