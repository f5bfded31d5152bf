"""What `study run` and `depthwidth demo` print when they end: the data's baselines, one verdict per scale
(winner and margin, or "no verdict"), the verdict stability, the recommendation and where the report is.
The full per-shape table stays in `study show`/`study status` and in the report."""

from __future__ import annotations


def closing_lines(summary, *, report=None, files=None) -> list[str]:
    """The closing lines of a finished study (`StudySummary`), with its `Report` and written files when there
    is a report."""
    from depthwidth.present.study import baselines_line, counts_line
    from depthwidth.report.gates import learned
    from depthwidth.report.noise import estimate_noise
    from depthwidth.report.stability import stability
    from depthwidth.report.verdicts import scale_verdicts

    rows = report.study.results if report is not None else summary.rows
    noise = report.noise if report is not None else estimate_noise(rows)
    bigram = summary.baselines.bigram if summary.baselines is not None else None
    lines = [counts_line(summary), baselines_line(summary.baselines), "verdict per scale:"]
    lines += [f"  {v.line}" for v in scale_verdicts(rows, noise, bigram=bigram)] or ["  no completed run"]
    stab = report.stability if report is not None else stability(rows, learned=learned)
    if stab is not None and stab.lines:
        lines += ["verdict stability:"] + [f"  {line}" for line in stab.lines]
    if report is not None:
        lines.append(f"recommendation: {report.recommendation.verdict}")
    validity = set(summary.validity)
    other = [w for w in summary.warnings if w not in validity]
    if other:
        lines.append(f"warnings ({len(other)}):")
        lines += [f"  {w}" for w in other]
    if files is not None:
        lines.append(f"report: {files.html} (also {files.markdown.name}, {files.csv.name}, {files.json.name})")
    return lines


def print_closing(console, summary, *, report=None, files=None) -> None:
    for line in closing_lines(summary, report=report, files=files):
        console.print(line, markup=False)


__all__ = ["closing_lines", "print_closing"]
