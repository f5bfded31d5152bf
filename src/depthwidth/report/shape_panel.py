"""The report's panel of the shape-aware law (`report.shape_law`): one picture and one HTML section.

Picture (`plot_shape_law`): left, loss against d_model/n_layers - the measured points of the two largest
measured scales with the fitted law along each scale's iso-parameter family, and the fitted law at the
target with its bootstrap band (left out when the data cannot determine the loss level there); right,
each buildable shape's loss gap to the best at the target with its paired band, the flat basin shaded,
the best starred and the shape chosen under the limits ringed. Section (`panel_html`): whether the runs
were imported, the model selection line, the fitted parameters with intervals, the prescription in words
and the basin's shapes with their latency and memory.
"""

from __future__ import annotations

import html
from pathlib import Path

from depthwidth.present.units import count, nbytes
from depthwidth.report.shape_law import ShapeLaw, nearest_scales
from depthwidth.report.study_plots import Figure, reference_lines

NAME = "shape_law"


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def imported_note(law: ShapeLaw | None) -> str | None:
    """The sentence a report shows for an imported study (None for a study this tool ran)."""
    if law is None or not law.imported:
        return None
    info = law.imported
    return (f"These {info.get('rows')} runs were imported from {info.get('table')} (source: "
            f"{', '.join(info.get('sources', []))}; sha256 {str(info.get('sha256', ''))[:12]}): they were trained "
            "elsewhere, so the fairness of their protocol (data, data order, token budgets, learning-rate tuning, "
            "seeds) cannot be checked; the checks below see only what the table states."
            + ("" if info.get("lr_given", True) else " The table gives no learning rates: the stored ones are "
               "placeholders."))


def plot_shape_law(law: ShapeLaw | None, out: Path, *, baselines=None) -> Figure | None:
    if law is None or law.fit is None or law.prescription is None:
        return None
    from depthwidth.present.figures import plain_log_ticks, pyplot
    from depthwidth.report.prescribe import Target, candidates
    from depthwidth.report.shape_law import Planner

    plt = pyplot()
    fit, pres, planner = law.fit, law.prescription, law.planner
    fig, (ax, gx) = plt.subplots(1, 2, figsize=(12, 5.2))
    cmap = plt.get_cmap("tab10")
    base = pres.best.shape
    for i, (n, tokens, pts) in enumerate(nearest_scales(list(law.points))):
        color = cmap(i + 1)
        ax.scatter([p.width / p.depth for p in pts], [p.loss for p in pts], color=color, s=22, zorder=3,
                   label=f"measured, N~{count(n)}, D={count(tokens)}")
        try:
            grid = Planner(**{**planner.to_dict(), "tolerance": 0.1, "aspect_range": (1.0, 1024.0)})
            members = candidates(base=base, target=Target(
                params=n, non_embedding=True, tokens=tokens, seq_len=pres.target.seq_len), align=grid.align,
                head_dim=grid.head_dim, min_layers=1, aspect_range=grid.aspect_range, tolerance=grid.tolerance)
        except (ValueError, RuntimeError):
            continue
        xs = [m.shape.aspect_ratio for m in members]
        ys = [fit.predict(width=m.shape.d_model, depth=m.shape.n_layers, tokens=tokens, params=m.non_embedding_params)
              for m in members]
        ax.plot(xs, ys, color=color, lw=1.2)
    cands = sorted(pres.candidates, key=lambda c: c.shape.aspect_ratio)
    xs = [c.shape.aspect_ratio for c in cands]
    if pres.loss_undetermined is None:
        ax.plot(xs, [c.loss.value for c in cands], color=cmap(0), lw=1.6,
                label=f"fit at the target, {count(pres.target.params)}")
        ax.fill_between(xs, [c.loss.lo for c in cands], [c.loss.hi for c in cands], color=cmap(0), alpha=0.2,
                        label=f"{pres.level:.0%} band")
    else:
        ax.text(0.02, 0.02, "the loss level at the target is not determined by the data\n(" + pres.loss_undetermined
                + ")", transform=ax.transAxes, fontsize=7, color="#555", va="bottom", wrap=True)
    ax.set_xscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("d_model / n_layers")
    ax.set_ylabel("validation loss (nats/token)")
    reference_lines(ax, baselines)
    ax.set_title(f"{fit.form}: {fit.text}", fontsize=9)
    ax.legend(fontsize=8)
    gx.plot(xs, [c.gap.value for c in cands], color=cmap(0), lw=1.6)
    gx.fill_between(xs, [c.gap.lo for c in cands], [c.gap.hi for c in cands], color=cmap(0), alpha=0.2)
    basin = [c.shape.aspect_ratio for c in cands if c.in_basin]
    gx.axvspan(min(basin), max(basin), color="#2e7d32", alpha=0.12, label="flat basin")
    gx.axhline(0.0, color="#555", lw=0.8)
    gx.scatter([pres.best.shape.aspect_ratio], [0.0], marker="*", s=160, color="#c62828", zorder=4,
               label=f"best {pres.best.label}")
    if pres.chosen is not None and pres.chosen is not pres.best:
        gx.scatter([pres.chosen.shape.aspect_ratio], [pres.chosen.gap.value], s=120, facecolors="none",
                   edgecolors="#1565c0", lw=1.8, zorder=4, label=f"chosen {pres.chosen.label}")
    gx.set_xscale("log")
    plain_log_ticks(gx)
    gx.set_xlabel("d_model / n_layers at the target")
    gx.set_ylabel("loss gap to the best")
    gx.set_title(f"target: {count(pres.target.params)} parameters", fontsize=9)
    gx.legend(fontsize=8)
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    png, svg = out / f"{NAME}.png", out / f"{NAME}.svg"
    fig.savefig(png, dpi=110)
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    caption = (f"Shape-aware law ({fit.form}) at the target scale with its {pres.level:.0%} bootstrap band and the "
               "measured points of the two largest scales (left), and each buildable shape's loss gap to the best "
               "with the flat basin shaded (right).")
    return Figure(name=NAME, title="Loss against aspect ratio at the target scale", caption=caption, png=png, svg=svg)


def shape_law_lines(law: ShapeLaw | None, escape) -> list[str]:
    """The markdown lines of the panel (every study string through `escape`)."""
    if law is None:
        return ["- not computed"]
    lines = [f"- **imported runs**: {escape(note)}" for note in [imported_note(law)] if note]
    if law.selection is not None:
        lines.append(f"- model selection: {escape(law.selection.line)}")
    if law.fit is None or law.prescription is None:
        return lines + [f"- no shape-aware law: {escape(law.skipped)}"]
    params = ", ".join(f"{k} {iv.value:.4g} [{iv.lo:.4g}, {iv.hi:.4g}]" for k, iv in law.fit.intervals.items())
    return lines + [f"- {law.fit.form}: L = {escape(law.fit.text)}; {params}", f"- {escape(law.prescription.verdict)}",
                    *[f"- warning: {escape(w)}" for w in law.prescription.warnings]]


def panel_html(law: ShapeLaw | None) -> str:
    """The HTML section's body (every study string escaped)."""
    if law is None:
        return '<p class="muted">Not computed.</p>'
    parts = []
    note = imported_note(law)
    if note:
        parts.append(f'<div class="warn">{_e(note)}</div>')
    if law.selection is not None:
        parts.append(f'<p id="model-selection">Model selection: {_e(law.selection.line)}.</p>')
    if law.fit is None or law.prescription is None:
        parts.append(f'<p class="muted">No shape-aware law: {_e(law.skipped)}</p>')
        return "".join(parts)
    fit, pres = law.fit, law.prescription
    cells = "".join(f"<tr><td>{_e(k)}</td><td class='num'>{iv.value:.4g}</td><td class='num'>[{iv.lo:.4g}, "
                    f"{iv.hi:.4g}]</td></tr>" for k, iv in fit.intervals.items())
    parts.append(f"<p>{_e(fit.form)}: L = {_e(fit.text)}, {fit.n_points} points, {fit.configs} configurations, "
                 f"in-sample error {100 * fit.in_sample_error:.2f}%.</p><table><thead><tr><th>parameter</th>"
                 f"<th>value</th><th>{fit.level:.0%} interval</th></tr></thead><tbody>{cells}</tbody></table>")
    parts.append(f'<p class="glance" id="prescription">{_e(pres.verdict)}</p>')
    rows = "".join(
        f"<tr><td>{_e(c.label)}</td><td class='num'>{c.shape.aspect_ratio:.3g}</td>"
        f"<td class='num'>{count(c.params)}</td>"
        f"<td class='num'>{'-' if pres.loss_undetermined else f'{c.loss.value:.4f}'}</td>"
        f"<td class='num'>{c.gap.value:+.4f} [{c.gap.lo:+.4f}, {c.gap.hi:+.4f}]</td>"
        f"<td class='num'>{_e('-' if c.decode_ms is None else f'{c.decode_ms:.3g}')}</td>"
        f"<td class='num'>{_e(nbytes(c.memory_bytes) if c.memory_bytes else '-')}</td>"
        f"<td>{'yes' if c.feasible else _e('; '.join(c.reasons))}</td></tr>"
        for c in pres.candidates if c.in_basin)
    parts.append(f"<table id='basin'><thead><tr><th>shape (basin)</th><th>d/L</th><th>params</th><th>loss</th>"
                 f"<th>gap to best</th><th>decode ms ({_e(pres.limits.hardware)})</th><th>{_e(pres.limits.memory)} "
                 f"memory</th><th>meets the limits</th></tr></thead><tbody>{rows}</tbody></table>")
    parts += [f'<div class="warn">{_e(w)}</div>' for w in pres.warnings]
    parts.append('<p class="muted">Forms: Liu et al. 2026 (arXiv 2602.05970); Hoffmann et al. 2022 approach 3 with a '
                 "log aspect-ratio penalty after Kaplan et al. 2020 (figure 5). Intervals: percentile bootstrap of "
                 'the points; they assume the form holds. Picture: <a href="#fig-shape_law">loss against aspect ratio'
                 "</a>.</p>")
    return "".join(parts)


__all__ = ["NAME", "imported_note", "panel_html", "plot_shape_law", "shape_law_lines"]
