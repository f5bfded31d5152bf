"""One self-contained HTML page for a study report: inline CSS, images inline as base64 PNG, no script,
no font, no CDN - it opens offline. Every string that comes from the study (names, labels, errors,
the spec text) goes through `html.escape`.

Order: title, at-a-glance line, study spec and protocol, protocol warnings, comparison table, plots,
trend fits, recommendation, runs that did not complete, the spec file.
"""

from __future__ import annotations

import base64
import html
from typing import Sequence

from depthwidth.report.budget_plots import budgets_html
from depthwidth.report.build import Report
from depthwidth.report.shape_panel import imported_note, panel_html
from depthwidth.report.stability_plot import NAME as STABILITY_FIGURE, stability_html
from depthwidth.report.study_plots import Figure
from depthwidth.present.units import count, nbytes, number, or_dash
from depthwidth.report.study_tables import LOSS_KEYS, SPEED_KEYS

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1280px;
padding:0 1rem;color:#1d1d1f;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
.muted{color:#666}.glance{background:#f2f7ff;border-left:4px solid #2f6fd6;padding:.6rem 1rem;margin:1rem 0}
.warn{background:#fff6e5;border-left:4px solid #e39b00;padding:.4rem 1rem;margin:.6rem 0}
.bad{background:#fdecec;border-left:4px solid #c62828;padding:.4rem 1rem;margin:.6rem 0}
table{border-collapse:collapse;font-size:.82rem;margin:.6rem 0}th,td{border:1px solid #ddd;padding:.25rem .45rem;
vertical-align:top;white-space:nowrap}th{background:#f5f5f7;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.chosen td{background:#e8f5e9}.scroll{overflow-x:auto}dl.kv{display:grid;grid-template-columns:max-content auto;
gap:.15rem 1rem}dl.kv dt{font-weight:600}dl.kv dd{margin:0;word-break:break-all}
figure{margin:1.2rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{color:#555;font-size:.9rem}
pre{background:#f7f7f7;padding:.8rem;overflow-x:auto;font-size:.8rem}
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _img(fig: Figure) -> str:
    data = base64.b64encode(fig.png.read_bytes()).decode("ascii")
    return (f'<figure id="fig-{_e(fig.name)}"><img src="data:image/png;base64,{data}" alt="{_e(fig.title)}">'
            f'<figcaption><b>{_e(fig.title)}.</b> {_e(fig.caption)} '
            f'<a href="{_e(fig.svg.name)}">SVG</a></figcaption></figure>')


def _kv(pairs: Sequence[tuple[str, object]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs) + "</dl>"


def _protocol(report: Report) -> str:
    s, p = report.study, report.study.protocol
    tokens = ", ".join(f"{g}: {t:,}" for g, t in p.tokens_by_group.items() if t is not None)
    pairs = [
        ("study", s.name), ("folder", s.folder), ("corpus", p.corpus),
        ("corpus hash", ", ".join(p.corpus_hashes) or "-"), ("tokenizer", p.tokenizer),
        ("sequence length / batch", f"{p.seq_len} / {p.batch_size}"), ("training tokens per run", tokens or "-"),
        ("parametrization", p.parametrization_text()),
        ("learning-rate grid", p.lr_grid), ("learning-rate search", p.lr_search_text()),
        ("learning-rate trials per shape", ", ".join(map(str, p.lr_trials)) or "-"),
        ("seeds", ", ".join(map(str, p.seeds)) or "-"),
        ("baselines (validation split)", _baselines(s.baselines)),
        ("batch-stream hashes", ", ".join(p.batch_stream_hashes) or "-"),
        ("study hardware", p.hardware), ("report hardware", report.table.hardware),
        ("fair comparison", ("cannot be checked (imported runs)" if imported_note(report.shape_law) else "yes")
         if p.fair else "NO - see the warnings"),
        ("runs", _run_counts(report)),
    ]
    return _kv(pairs)


def _baselines(baselines) -> str:
    if baselines is None:
        return "not known (the corpus is not readable here): no run is judged against the data's baselines"
    return (f"unigram {baselines.unigram:.4f}, bigram {baselines.bigram:.4f} nats per token (add-one smoothing, "
            "counts from the training split); a run counts as learned below the bigram baseline")


def verdict_list(report: Report, escape) -> list[str]:
    """One line per full-horizon group: its winner and margin against the noise, or no verdict."""
    return [escape(v.line) for v in report.verdicts]


def _verdicts(report: Report) -> str:
    items = "".join(f"<li>{line}</li>" for line in verdict_list(report, _e))
    return f'<ul id="verdicts">{items}</ul>' if items else '<p class="muted">No completed run.</p>'


def _run_counts(report: Report) -> str:
    counts: dict[str, int] = {}
    for r in report.study.runs:
        counts[r.status] = counts.get(r.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def _warnings(report: Report) -> str:
    p = report.study.protocol
    note = imported_note(report.shape_law)
    out = f'<div class="bad"><b>Imported runs:</b> {_e(note)}</div>' if note else ""
    if p.warnings:
        out += '<div class="bad"><b>Not a fair comparison:</b><ul>' + "".join(f"<li>{_e(w)}</li>" for w in p.warnings)
        out += "</ul></div>"
    notes = [w for w in report.study.notes if not w.startswith("unfair")]
    notes += list(report.budgets.warnings) if report.budgets is not None else []
    if notes:
        out += '<div class="warn"><ul>' + "".join(f"<li>{_e(w)}</li>" for w in notes) + "</ul></div>"
    return out or '<p class="muted">No protocol warnings.</p>'


def _table(report: Report, keys: tuple[str, ...], table_id: str) -> str:
    t = report.table
    cols = t.section(keys)
    chosen = report.recommendation.chosen.result.key if report.recommendation.chosen else None
    head = "".join(f'<th title="{_e(c.note)}">{_e(c.title)}</th>' for c in cols)
    body = []
    for row in t.rows:
        cls = ' class="chosen"' if f"{row['group']}/{row['shape']}" == chosen else ""
        cells = "".join(f'<td class="{"num" if isinstance(row.get(c.key), (int, float)) else ""}">'
                        f"{_e(t.text(row, c.key))}</td>" for c in cols)
        body.append(f"<tr{cls}>{cells}</tr>")
    return (f'<div class="scroll"><table id="{_e(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _fits(report: Report) -> str:
    tr = report.trends
    rows = []
    for f in tr.families:
        if f.fit is None:
            rows.append(f"<tr><td>{_e(f.family)}</td><td>{_e(', '.join(f.labels))}</td>"
                        f'<td colspan="4">{_e(f.skipped)}</td></tr>')
            continue
        iv = f.fit.intervals
        cell = lambda k: f"{iv[k].value:.4g} [{iv[k].lo:.4g}, {iv[k].hi:.4g}]"  # noqa: E731
        rows.append(f"<tr><td>{_e(f.family)}</td><td>{_e(', '.join(f.labels))}</td><td>{_e(cell('E'))}</td>"
                    f"<td>{_e(cell('A'))}</td><td>{_e(cell('alpha'))}</td><td>{f.distinct_n}</td></tr>")
    table = ("<table><thead><tr><th>family</th><th>shapes</th><th>E</th><th>A</th><th>alpha</th><th>scales</th></tr>"
             f"</thead><tbody>{''.join(rows)}</tbody></table>")
    extra = ""
    if tr.extrapolation:
        ex = "".join(f"<tr><td>{_e(p.family)}</td><td>{count(p.n)}</td><td>{p.loss.value:.4f}</td>"
                     f"<td>[{p.loss.lo:.4f}, {p.loss.hi:.4f}]</td></tr>" for p in tr.extrapolation)
        extra = ("<h3>Extrapolation</h3><table><thead><tr><th>family</th><th>N</th><th>predicted loss</th>"
                 f"<th>95% band</th></tr></thead><tbody>{ex}</tbody></table>"
                 f"<p>Best aspect ratio at the first target: <b>{_e(tr.best_family)}</b>"
                 f"{'' if tr.supported else ' - not supported by the data (see below)'}.</p>")
    warn = "".join(f'<div class="warn">{_e(w)}</div>' for w in tr.warnings)
    return ('<p class="muted">L(N) = E + A/N^alpha per aspect-ratio family (non-embedding N), Huber loss on log '
            "residuals, L-BFGS-B from a grid of starts (Hoffmann et al. 2022, approach 3); 95% percentile bootstrap "
            f"intervals.</p>{table}{extra}{warn}")


def _recommendation(report: Report) -> str:
    rec = report.recommendation
    parts = [f'<p class="glance" id="verdict">{_e(rec.verdict)}</p>']
    if rec.trade:
        parts.append(f"<p>Trade against the unconstrained best: <b>{_e(rec.trade)}</b>.</p>")
    parts.append(f'<p class="muted">Noise: {_e(rec.noise.description)}</p>')
    rows = "".join(
        f"<tr><td>{_e(c.result.group)}</td><td>{_e(c.result.shape_label)}</td>"
        f"<td class='num'>{c.result.val_loss:.4f}</td><td class='num'>{_e(or_dash(c.target.decode_ms, number))}</td>"
        f"<td>{_e(c.target.decode_source)}</td><td class='num'>{_e(nbytes(c.target.memory_bytes))}</td>"
        f"<td>{'yes' if c.feasible else _e('; '.join(c.reasons))}</td></tr>" for c in rec.candidates)
    parts.append("<table><thead><tr><th>budget</th><th>shape</th><th>loss</th><th>decode ms</th><th>source</th>"
                 f"<th>{_e(rec.constraints.memory)} memory</th><th>meets the limits</th></tr></thead>"
                 f"<tbody>{rows}</tbody></table>")
    return "".join(parts)


def _runs(report: Report) -> str:
    bad = report.study.problem_runs
    if not bad:
        return '<p class="muted">Every run completed.</p>'
    rows = "".join(
        f"<tr><td>{_e(r.status)}</td><td>{_e(r.kind)}</td><td>{_e(r.group)}</td><td>{_e(r.label)}</td>"
        f"<td>{_e('' if r.lr is None else f'{r.lr:.3g}')}</td><td>{_e(r.seed)}</td>"
        f"<td>{_e(r.diverged_at_step)}</td><td><code>{_e(r.run_id[:10])}</code></td><td>{_e(r.error)}</td></tr>"
        for r in bad)
    return ('<table id="problem-runs"><thead><tr><th>status</th><th>kind</th><th>budget</th><th>shape</th><th>LR</th>'
            "<th>seed</th><th>diverged at step</th><th>run</th><th>error</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def render_html(report: Report, figures: Sequence[Figure], *, notes: Sequence[str] = ()) -> str:
    """The page (a str); `figures` must already be written (their PNGs are embedded)."""
    s = report.study
    rec = report.recommendation
    glance = rec.verdict + (f" Trade: {rec.trade}." if rec.trade else "")
    plots = "".join(_img(f) for f in figures if f.name != STABILITY_FIGURE) or '<p class="muted">Nothing to plot.</p>'
    stab_fig = next((f for f in figures if f.name == STABILITY_FIGURE), None)  # drawn in its own section
    plot_notes = "".join(f'<p class="muted">{_e(n)}</p>' for n in notes)
    sections = [
        f"<h1>Depth versus width: {_e(s.name)}</h1>",
        f'<p class="muted">{_e(s.description)}</p>' if s.description else "",
        f'<div class="glance"><b>At a glance.</b> {_e(glance)} <a href="#recommendation">Details</a></div>',
        f'<h2 id="verdict-per-scale">Verdict per scale</h2>{_verdicts(report)}',
        f'<h2 id="protocol">Study and protocol</h2>{_protocol(report)}',
        f'<h2 id="warnings">Protocol warnings</h2>{_warnings(report)}',
        f'<h2 id="table">Comparison</h2><h3>Shape and loss</h3>{_table(report, LOSS_KEYS, "comparison-loss")}'
        f'<h3>Speed and memory</h3>{_table(report, SPEED_KEYS, "comparison-speed")}'
        '<p class="muted">The highlighted row is the recommendation. Every column is in results.csv.</p>',
        f'<h2 id="plots">Plots</h2>{plots}{plot_notes}',
        f'<h2 id="budgets">Ranking against budget</h2>{budgets_html(report.budgets)}',
        f'<h2 id="stability">Verdict stability</h2>{stability_html(report.stability, stab_fig, img=_img)}',
        f'<h2 id="fits">Trend fits</h2>{_fits(report)}',
        f'<h2 id="shape-law">Shape-aware law and prescription</h2>{panel_html(report.shape_law)}',
        f'<h2 id="recommendation">Recommendation</h2>{_recommendation(report)}',
        f'<h2 id="runs">Runs that did not complete</h2>{_runs(report)}',
        f'<h2 id="spec">Spec file</h2><pre>{_e(s.spec_text) or _e(s.spec)}</pre>',
        '<p class="muted">Written by depthwidth report. Files next to this page: report.md, results.csv, '
        "results.json and every plot as PNG and SVG.</p>",
    ]
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>{_e(s.name)} - depthwidth report</title><style>{CSS}</style></head><body>"
            + "".join(sections) + "</body></html>\n")


__all__ = ["render_html"]
