"""The study report: its data (`data`, `rows`), comparison table, plots, trend fits, noise estimate,
recommendation, HTML page and CSV/JSON/markdown export. The terminal tables of the other commands, the
plan's plot and the units every number is written in live in `depthwidth.present`.

Importing this package is cheap (no numpy, matplotlib or torch); each module imports what it needs
when it is called.

    from depthwidth.report import write_study_report
    paths = write_study_report("demo-study")          # demo-study/report/index.html, ...
"""

from __future__ import annotations

import os
from pathlib import Path

REPORT_FOLDER = "report"


def write_study_report(study_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, **options) -> list[Path]:
    """Load the study in `study_dir`, write its report to `out_dir` (default `<study_dir>/report`) and
    return the paths [index.html, report.md, results.csv, results.json]. `options` go to
    `report.build.build_report` (hardware, constraints, n_bootstrap, seed)."""
    from depthwidth.report.build import report_for
    from depthwidth.report.export import write_report

    out = Path(out_dir) if out_dir else Path(study_dir) / REPORT_FOLDER
    files = write_report(report_for(study_dir, **options), out)
    return [files.html, files.markdown, files.csv, files.json]


__all__ = ["REPORT_FOLDER", "write_study_report"]
