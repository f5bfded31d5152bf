"""How `recommend --target-params` and `study import` look in the terminal: the fitted law, the model
selection line, the prescription's candidates near the basin and the verdict; an import's summary lines.
Pure presentation of `report.shape_law.ShapeLaw` and `study.importer.ImportReport` records."""

from __future__ import annotations

from depthwidth.present.units import count, nbytes


def law_lines(law) -> list[str]:
    """The fit: the model selection line, the form with its parameters and intervals, the fit's warnings."""
    lines = []
    if law.imported:
        sources = ", ".join(law.imported.get("sources", []))
        lines.append(f"runs imported from {law.imported.get('table')} (source: {sources}): trained elsewhere, the "
                     "fairness of their protocol cannot be checked")
    if law.selection is not None:
        lines.append("model selection: " + law.selection.line)
    fit = law.fit
    if fit is not None:
        params = ", ".join(f"{k} {iv.value:.4g} [{iv.lo:.4g}, {iv.hi:.4g}]" for k, iv in fit.intervals.items())
        lines.append(f"fit ({fit.form}): L = {fit.text}; {fit.n_points} points, {fit.configs} configurations, "
                     f"in-sample error {100 * fit.in_sample_error:.2f}%; {params} "
                     f"({fit.level:.0%} bootstrap intervals)")
        lines += [f"warning: {w}" for w in fit.warnings]
    return lines


def prescription_table(pres, *, around: int = 4):
    """The basin's shapes and `around` candidates on each side of it, by depth."""
    from rich import box
    from rich.table import Table

    cands = list(pres.candidates)
    inside = [i for i, c in enumerate(cands) if c.in_basin]
    lo, hi = max(0, min(inside) - around), min(len(cands), max(inside) + around + 1)
    table = Table(box=box.SIMPLE_HEAVY, title_justify="left",
                  title=f"Candidates at the target ({len(cands)} buildable, {hi - lo} shown, by depth)")
    for name in ("shape", "d/L", "params", "tokens", "loss", "gap to best", f"{pres.level:.0%} gap interval",
                 f"decode ms ({pres.limits.hardware})", f"{pres.limits.memory} mem", "basin", "limits"):
        table.add_column(name, justify="left" if name in ("shape", "basin", "limits") else "right")
    for c in cands[lo:hi]:
        mark = ("[bold green]best[/]" if c is pres.best else "[green]yes[/]") if c.in_basin else ""
        if c is pres.chosen:
            mark += " [bold]<- chosen[/]"
        table.add_row(c.label, f"{c.shape.aspect_ratio:.3g}", count(c.params), count(c.tokens),
                      "-" if pres.loss_undetermined else f"{c.loss.value:.4f}", f"{c.gap.value:+.4f}",
                      f"[{c.gap.lo:+.4f}, {c.gap.hi:+.4f}]", "-" if c.decode_ms is None else f"{c.decode_ms:.3g}",
                      nbytes(c.memory_bytes) if c.memory_bytes else "-", mark,
                      "yes" if c.feasible else "; ".join(c.reasons))
    return table


def import_lines(report) -> list[str]:
    head = (f"imported {report.runs} runs ({report.shapes} shapes; groups {', '.join(report.groups)}; source "
            f"{', '.join(report.sources)}) from {report.table} into {report.study_dir}")
    return [head, f"table sha256 {report.sha256}",
            "trained elsewhere: the report and recommend read these runs, but the fairness of their protocol "
            "cannot be checked", *[f"note: {n}" for n in report.notes]]


__all__ = ["import_lines", "law_lines", "prescription_table"]
