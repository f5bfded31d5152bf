"""Write a study report to a folder: index.html (self-contained), report.md, results.csv, results.json,
and every plot as PNG and SVG. Every file is written into a temporary folder inside the target and the
files are moved in together at the end (`depthwidth.files.staged_folder`), so an interrupted write never
leaves a half page that looks complete, and a full disk or a read-only target is one line naming the
folder and the reason, leaving the earlier report there as it was. Every cell of results.csv goes through
`csv_cell`: a study's labels are the user's text, and a spreadsheet opening the file runs none of them."""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import staged_folder, write_text
from depthwidth.present.units import count
from depthwidth.report.build import Report
from depthwidth.report.shape_panel import shape_law_lines
from depthwidth.report.study_plots import Figure
from depthwidth.report.study_tables import MARKDOWN_KEYS

HTML_NAME = "index.html"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportFiles:
    folder: Path
    html: Path
    markdown: Path
    csv: Path
    json: Path
    figures: tuple[Figure, ...]
    notes: tuple[str, ...]  # plots that were left out, and why

    def to_dict(self) -> dict:
        return {"folder": str(self.folder), "html": str(self.html), "markdown": str(self.markdown),
                "csv": str(self.csv), "json": str(self.json), "figures": [f.to_dict() for f in self.figures],
                "notes": list(self.notes)}


def draw_figures(report: Report, out: Path) -> tuple[list[Figure], list[str]]:
    """Every plot of the report, in page order; (figures, notes on what was left out)."""
    from depthwidth.report import study_plots as sp
    from depthwidth.report.budget_plots import plot_budgets
    from depthwidth.report.inspect_panel import plot_inspection
    from depthwidth.report.probe_plots import plot_probes
    from depthwidth.report.shape_panel import plot_shape_law
    from depthwidth.report.stability_plot import plot_stability
    from depthwidth.report.study_tradeoff import plot_tradeoffs
    from depthwidth.report.targets import STUDY

    s = report.study
    figures: list[Figure | None] = [
        sp.plot_basin(s, out),
        sp.plot_curves(s, out),
        sp.plot_pareto_latency(s, report.targets, out, hardware=report.table.hardware),
        sp.plot_pareto_throughput(s, out),
    ]
    notes: list[str] = []
    lr = sp.plot_lr(s, out)
    figures.append(lr)
    if lr is None:
        notes.append("lr: no learning-rate trials to plot")
    trade_hw = report.hardware
    if trade_hw == STUDY:  # the profile the study's benches predicted with, else the table's CPU row
        from depthwidth.shapes.hardware import HardwareSpec

        trade_hw = HardwareSpec.from_dict(s.bench_hardware) if s.bench_hardware else "cpu"
    trade, skipped = plot_tradeoffs(s, out, hardware=trade_hw)
    figures += trade
    notes += [f"trade-off picture left out for {x}" for x in skipped]
    figures += [sp.plot_slices(s, out), plot_probes(s, out), plot_inspection(s, out), sp.plot_latency_check(s, out),
                sp.plot_fits(s, report.trends, out), plot_shape_law(report.shape_law, out, baselines=s.baselines),
                plot_budgets(report.budgets, out, hardware=report.table.hardware, baselines=s.baselines), plot_stability(report.stability, out)]
    names = ("basin", "curves", "pareto_latency", "pareto_throughput")
    for name, fig in zip(names, figures[:4]):
        if fig is None:
            notes.append(f"{name}: no data to plot")
    return [f for f in figures if f is not None], notes


def write_report(report: Report, out_dir: str | os.PathLike) -> ReportFiles:
    """Draw the plots and write every file of the report into `out_dir` (created when missing)."""
    from depthwidth.report.html import render_html

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {out}: exists and is not a folder")
    with staged_folder(out, what="the report") as tmp:
        figures, notes = draw_figures(report, tmp)
        _write(tmp / HTML_NAME, render_html(report, figures, notes=notes))
        _write(tmp / "report.md", render_markdown(report, figures, notes=notes))
        _write(tmp / "results.csv", render_csv(report))
        payload = report.to_dict() | {"figures": [f.to_dict() for f in figures], "notes": notes}
        _write(tmp / "results.json", json.dumps(_clean(payload), indent=2, default=str) + "\n")
    figures = [dataclasses.replace(f, png=out / f.png.name, svg=out / f.svg.name) for f in figures]
    return ReportFiles(folder=out, html=out / HTML_NAME, markdown=out / "report.md", csv=out / "results.csv",
                       json=out / "results.json", figures=tuple(figures), notes=tuple(notes))


def _write(path: Path, text: str) -> Path:
    return write_text(path, text)


def _clean(value):
    """JSON without NaN or infinity (null instead), keys as strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


#: first characters that make a spreadsheet read a text cell as a formula (OWASP, "CSV Injection")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value):
    """A value as a CSV cell a spreadsheet shows and never runs: a text that starts like a formula
    (`FORMULA_STARTS`) and is not a number gets a leading single quote (OWASP's rule); numbers, and texts
    that are numbers ("-0.5", "1e-3"), stay as they are; None is an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def render_csv(report: Report) -> str:
    """One row per (budget, shape), raw values; the header is the comparison table's column keys. Every
    cell, the header's too, goes through `csv_cell`."""
    t = report.table
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c.key) for c in t.columns])
    for row in t.rows:
        writer.writerow([csv_cell(row.get(c.key)) for c in t.columns])
    return buf.getvalue()


def _md_escape(text: str) -> str:
    """Study strings in markdown: HTML special characters escaped (markdown renders raw HTML), no table breaks."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, figures, *, notes=()) -> str:
    from depthwidth.report.html import verdict_list

    s, p, rec, t = report.study, report.study.protocol, report.recommendation, report.table
    cols = [c for c in t.columns if c.key in MARKDOWN_KEYS]
    lines = [f"# Depth versus width: {_md_escape(s.name)}", ""]
    if s.description:
        lines += [_md_escape(s.description), ""]
    lines += ["## Study and protocol", ""]
    tokens = ", ".join(f"{g}: {v:,}" for g, v in p.tokens_by_group.items() if v is not None)
    for k, v in (("corpus", f"{p.corpus} (hash {', '.join(p.corpus_hashes) or '-'})"), ("tokenizer", p.tokenizer),
                 ("sequence length / batch", f"{p.seq_len} / {p.batch_size}"), ("training tokens per run", tokens),
                 ("parametrization", p.parametrization_text()), ("learning-rate grid", p.lr_grid),
                 ("learning-rate search", p.lr_search_text()), ("LR trials per shape", ", ".join(map(str, p.lr_trials))),
                 ("seeds", ", ".join(map(str, p.seeds))), ("batch-stream hashes", ", ".join(p.batch_stream_hashes)),
                 ("baselines", "not known" if s.baselines is None else s.baselines.describe()),
                 ("fair", "yes" if p.fair else "NO")):
        lines.append(f"- **{k}**: {_md_escape(v)}")
    lines += ["", "## Verdict per scale", "", *[f"- {line}" for line in verdict_list(report, _md_escape)]]
    lines += ["", "## Protocol warnings", ""]
    budget_warnings = report.budgets.warnings if report.budgets is not None else ()
    lines += [f"- {_md_escape(w)}" for w in (*p.warnings, *s.notes, *budget_warnings)] or ["- none"]
    lines += ["", "## Comparison", "", "| " + " | ".join(c.title for c in cols) + " |",
              "|" + "---|" * len(cols)]
    for row in t.rows:
        lines.append("| " + " | ".join(_md_escape(t.text(row, c.key)) for c in cols) + " |")
    lines += ["", "All columns are in results.csv.", "", "## Plots", ""]
    for f in figures:
        lines += [f"![{f.title}]({f.png.name})", "", f"*{_md_escape(f.caption)}* ([SVG]({f.svg.name}))", ""]
    lines += [f"- {_md_escape(n)}" for n in notes]
    if report.budgets is not None and report.budgets.ladders:
        lines += ["", "## Ranking against budget", ""]
        for lad in report.budgets.ladders:
            lines += [f"- {lad.group} {_md_escape(v)}" for v in lad.verdicts]
            lines += [f"- {lad.group}: {c.a} ahead below, {c.b} above about {c.tokens:,.0f} tokens "
                      f"(interval {c.low:,.0f} to {c.high:,.0f})"
                      + ("" if c.resolved else "; within the seed noise") for c in lad.crossovers]
        lines.append("- the learning rate of every horizon is the one chosen at the full horizon")
    if report.stability is not None and report.stability.lines:
        lines += ["", "## Verdict stability", ""]
        lines += [f"- {_md_escape(x)}" for x in report.stability.lines]
    lines += ["", "## Trend fits", ""]
    for f in report.trends.families:
        if f.fit is None:
            lines.append(f"- {f.family}: {_md_escape(f.skipped)}")
        else:
            iv = f.fit.intervals
            lines.append(f"- {f.family}: L(N) = {iv['E'].value:.4g} [{iv['E'].lo:.4g}, {iv['E'].hi:.4g}] + "
                         f"{iv['A'].value:.4g}/N^{iv['alpha'].value:.3f} "
                         f"(alpha 95% [{iv['alpha'].lo:.3f}, {iv['alpha'].hi:.3f}], {f.distinct_n} scales)")
    for x in report.trends.extrapolation:
        lines.append(f"- {x.family} at N={count(x.n)}: {x.loss.value:.4f} [{x.loss.lo:.4f}, {x.loss.hi:.4f}]")
    lines += [f"- warning: {_md_escape(w)}" for w in report.trends.warnings]
    lines += ["", "## Shape-aware law and prescription", "", *shape_law_lines(report.shape_law, _md_escape)]
    lines += ["", "## Recommendation", "", _md_escape(rec.verdict), ""]
    if rec.trade:
        lines += [f"Trade: {_md_escape(rec.trade)}.", ""]
    lines += [f"Noise: {_md_escape(rec.noise.description)}", "", "## Runs that did not complete", ""]
    bad = s.problem_runs
    lines += [f"- {r.status}: {r.kind} {_md_escape(r.label)} ({_md_escape(r.group)}) lr={r.lr} seed={r.seed}"
              f"{'' if r.diverged_at_step is None else f' diverged at step {r.diverged_at_step}'}: "
              f"{_md_escape(r.error or '')}" for r in bad] or ["- none"]
    return "\n".join(lines) + "\n"


__all__ = ["FORMULA_STARTS", "HTML_NAME", "ReportFiles", "csv_cell", "draw_figures", "render_csv", "render_markdown",
           "write_report"]
