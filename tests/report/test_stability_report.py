"""The report of the fixture study shows its verdict stability. Without a validity gate P400k's ranking is read
against P100k's: one pair of shapes matched by aspect-ratio family (L4-H96/L2-H64 at d/L~32, L16-H48/L8-H32 at
d/L~4)."""

from dataclasses import replace

from depthwidth.report.export import draw_figures, render_markdown
from depthwidth.report.html import render_html
from depthwidth.report.stability import stability


def test_the_report_has_a_verdict_stability_section(written_report):
    report, files = written_report
    assert report.stability is not None and report.stability.lines
    page = files.html.read_text()
    section = page[page.index('<h2 id="stability">Verdict stability</h2>'):page.index('<h2 id="fits">')]
    for line in report.stability.lines:
        assert line.replace("'", "&#x27;") in section
    assert "DataDecide (Magnusson et al. 2025" in section
    assert "## Verdict stability" in files.markdown.read_text()
    assert report.to_dict()["stability"]["lines"] == list(report.stability.lines)


def test_every_result_counted_gives_the_pair_its_line_and_figure(written_report, tmp_path):
    report, _ = written_report
    report = replace(report, stability=stability(report.study.results, n_bootstrap=10))
    (a,) = report.stability.agreements
    assert (a.ladder, a.proxy, a.kind, a.pairs, a.agree) == ("P400k", "P100k", "scale", 1, 1)
    assert a.matched == (("L16-H48-A3", "L8-H32-A2"), ("L4-H96-A6", "L2-H64-A4"))
    assert a.line.startswith("P400k: the ranking at P100k agrees with P400k on 1 of 1 pair, 100%")
    figures, _ = draw_figures(report, tmp_path)
    assert "stability" in {f.name for f in figures}
    page = render_html(report, figures)
    section = page[page.index('<h2 id="stability">'):page.index('<h2 id="fits">')]
    assert a.line.replace("'", "&#x27;") in section and 'id="fig-stability"' in section
    assert page.count('id="fig-stability"') == 1 and page.count("data:image/png;base64,") == len(figures)
    assert f"- {a.line}" in render_markdown(report, figures)
