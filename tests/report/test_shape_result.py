"""One per-shape type: the study summary builds `ShapeResult`s once; the report's loader only adds the
curves, so `study status`, the HTML/markdown/CSV comparison and `recommend` show the same numbers."""

import dataclasses

import pytest
from rich.console import Console

from depthwidth.present.study import shapes_table
from depthwidth.report.data import load_study
from depthwidth.study import Store, summarize
from depthwidth.study.summary import ShapeResult


def test_the_report_reads_the_summarys_results_with_curves_added(fixture_study):
    folder, losses = fixture_study
    with Store.open(folder) as store:
        summary = summarize(store)
    study = load_study(folder)
    assert all(type(r) is ShapeResult for r in study.results)
    assert [dataclasses.replace(r, curves=(), eval_noise=None) for r in study.results] == list(summary.rows)
    row = next(r for r in summary.rows if r.key == "P400k/L4-H96-A6")
    assert row.val_loss == pytest.approx((losses[("P400k", "L4-H96-A6", 0.003, 0)]
                                          + losses[("P400k", "L4-H96-A6", 0.003, 1)]) / 2)
    assert row.best_run_ids and len(row.best_run_ids) == 2 and row.tokens == 204800
    assert row.slice_losses.keys() == {"shakespeare", "python-docs"} and row.bench_context == 48
    assert all(len(r.curves) == r.n_seeds for r in study.results if r.seed_losses)


def test_terminal_and_report_tables_agree(fixture_study, written_report):
    folder, _ = fixture_study
    report, files = written_report
    console = Console(width=250, record=True, file=open("/dev/null", "w"))
    with Store.open(folder) as store:
        console.print(shapes_table(summarize(store)))
    terminal = console.export_text()
    table = report.table
    for row in table.rows:
        line = next(x for x in terminal.splitlines() if f" {row['shape']} " in x and row["group"] in x)
        for key in ("val_loss", "tokens_per_s", "best_lr"):
            assert table.text(row, key) in line.split(), (key, line)
        assert table.text(row, "val_loss") in files.markdown.read_text()
