"""The validity gates in the report (`study.validity`, `report.gates`): a shape that is not below the
bigram baseline is left out of rankings, fits and the recommendation, a scale where nothing learned gets
"no verdict", and the recommendation compares the largest scale's shapes only (like with like)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fixture_study import build_fixture_study

from depthwidth.cli.closing import closing_lines
from depthwidth.report.build import build_report
from depthwidth.report.data import load_study
from depthwidth.report.recommend import Constraints, recommend


def _report(tmp_path, bigram: float):
    build_fixture_study(tmp_path / "s", bigram=bigram, unigram=bigram + 0.8)
    return build_report(load_study(tmp_path / "s"), n_bootstrap=10)


def test_a_study_above_the_bigram_baseline_gets_no_verdict_and_no_fit(tmp_path):
    report = _report(tmp_path, bigram=2.0)  # every synthetic loss is above 2.0
    rows = report.study.results
    assert rows and all(r.learned is False for r in rows if r.val_loss is not None)
    assert all(r.bigram_gain == pytest.approx(2.0 - r.val_loss) for r in rows if r.val_loss is not None)
    rec = report.recommendation
    assert rec.chosen is None and rec.decided_by == "none" and rec.groups == ("P400k",)
    assert rec.verdict == ("no verdict at P400k: no run is below the bigram baseline (2.000): nothing to "
                           "recommend.")
    assert all(f.fit is None for f in report.trends.families)
    assert "8 of 8 shape results are not below the bigram baseline and are not fitted" in report.trends.warnings
    assert report.shape_law.fit is None and report.shape_law.skipped.startswith("no point passes the validity gates")
    notes = report.study.notes
    assert ("P100k: no shape is below the bigram baseline (2.000); not learned, so left out of rankings, fits and "
            "the recommendation") in notes
    assert report.stability.agreements == ()


def test_unlearned_shapes_are_left_out_and_named(tmp_path):
    report = _report(tmp_path, bigram=2.6)  # P100k: none below; P400k: L16-H48 (2.64) not, the rest below
    rec = report.recommendation
    assert rec.groups == ("P400k",) and rec.left_out == ("P400k/L16-H48-A3",)
    assert rec.chosen.result.shape_label == "L4-H96-A6"
    assert {c.result.group for c in rec.candidates} == {"P400k"}
    assert "L16-H48-A3" not in [c.result.shape_label for c in rec.candidates]
    assert "Left out as not learned (not below the bigram baseline 2.600): L16-H48-A3." in rec.verdict
    notes = report.study.notes
    assert ("P400k: 1 of 4 shapes is not below the bigram baseline (2.600): L16-H48-A3; not learned, so left out "
            "of rankings, fits and the recommendation") in notes
    # one scale of learned points is left: no trend is fitted (the fixture's [report] asks for 2 scales)
    assert all(f.fit is None for f in report.trends.families)
    assert "the points left span 1 scale(s); a fit needs learned points at 2 scales, so none is fitted" in \
        report.trends.warnings
    table = {(row["group"], row["shape"]): row for row in report.table.rows}
    assert table[("P400k", "L16-H48-A3")]["learned"] is False
    assert table[("P400k", "L4-H96-A6")]["bigram_gain"] == pytest.approx(2.6 - rec.chosen.result.val_loss)
    assert table[("P400k", "L4-H96-A6")]["bigram_baseline"] == 2.6


def test_a_smaller_scale_is_never_recommended_over_the_target_scale(tmp_path):
    report = _report(tmp_path, bigram=3.2)
    rows = list(report.study.results)
    small = next(i for i, r in enumerate(rows) if r.group == "P100k" and r.seed_losses)
    rows[small] = replace(rows[small], seed_losses=(1.0, 1.0), bigram_gain=2.2, learned=True)  # better than all
    rec = recommend(rows, Constraints(hardware="cpu"), seq_len=64, batch_size=8, noise=report.noise)
    assert rec.groups == ("P400k",) and rec.chosen.result.group == "P400k"
    named = recommend(rows, Constraints(hardware="cpu", group="P100k"), seq_len=64, batch_size=8, noise=report.noise)
    assert named.chosen.result.key == rows[small].key  # a group named is compared on its own


def test_the_closing_lines_give_a_verdict_per_scale(tmp_path):
    report = _report(tmp_path, bigram=2.6)
    from depthwidth.study import Store, summarize

    with Store.open(tmp_path / "s") as store:
        summary = summarize(store)
    lines = closing_lines(summary, report=report)
    assert lines[1] == ("baselines: unigram 3.400, bigram 2.600 nats per token (validation split, add-one smoothing, "
                        "counts from the training split); a run counts as learned below the bigram baseline")
    verdicts = lines[lines.index("verdict per scale:") + 1: lines.index("verdict per scale:") + 3]
    assert verdicts[0] == "  no verdict at P100k: no run is below the bigram baseline (2.600) (sp)"
    assert verdicts[1].startswith("  P400k (sp): L4-H96-A6 2.42")
    assert "ahead of L8-H64-A4" in verdicts[1] and "beyond the noise" in verdicts[1]
    assert "1 of 4 shapes not learned, left out" in verdicts[1]
    assert next(x for x in lines if x.startswith("recommendation: ")).startswith(
        "recommendation: Recommended: L4-H96-A6 (P400k")
    assert "  failed: L1-H96-A6 lr=0.001 seed=1: RuntimeError: out of memory (synthetic)" in lines


def test_the_page_and_the_markdown_give_the_baselines_and_a_verdict_per_scale(tmp_path):
    from depthwidth.report.export import write_report

    report = _report(tmp_path, bigram=2.6)
    files = write_report(report, tmp_path / "report")
    page, md = files.html.read_text(), files.markdown.read_text()
    assert "<dt>baselines (validation split)</dt><dd>unigram 3.4000, bigram 2.6000 nats per token" in page
    assert '<h2 id="verdict-per-scale">Verdict per scale</h2><ul id="verdicts"><li>no verdict at P100k: no run is ' \
           "below the bigram baseline (2.600) (sp)</li><li>P400k (sp): L4-H96-A6 2.42" in page
    assert "- **baselines**: unigram 3.400, bigram 2.600 nats per token" in md
    assert "## Verdict per scale\n\n- no verdict at P100k: no run is below the bigram baseline (2.600) (sp)\n" in md
    data = __import__("json").loads(files.json.read_text())
    assert [v["winner"] for v in data["verdicts"]] == [None, "L4-H96-A6"]
    assert data["study"]["baselines"]["bigram"] == 2.6
