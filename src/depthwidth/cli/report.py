"""`depthwidth report`: turn a study folder into evidence - one self-contained HTML page, report.md,
results.csv, results.json and every plot as PNG and SVG.

    depthwidth report demo-study -o demo-report
    depthwidth report studies/tiny -o out --hardware h100 --max-decode-ms 5 --json
"""

from __future__ import annotations

import argparse
import sys

from depthwidth.errors import UserError
from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors, positive_float
from depthwidth.report.limits import LIMITS, bounded_count
from depthwidth.report.targets import STUDY

HELP = "write a study's report: HTML page, markdown, CSV, JSON and plots"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help=HELP, description=HELP + " (the page needs no network).")
    one_line_errors(p)
    p.add_argument("study", metavar="STUDY", help="study folder (holds study.sqlite)")
    p.add_argument("-o", "--out", metavar="DIR", help="output folder (default STUDY/report)")
    p.add_argument("--hardware", metavar="NAME",
                   help="target hardware of the latency columns and the recommendation: a row of `depthwidth hw "
                        f"list`, or '{STUDY}' for the study's own measurements, on the machine it ran on (default: "
                        "the study's hardware)")
    p.add_argument("--max-decode-ms", type=positive_float, metavar="MS", help="latency limit of the recommendation")
    p.add_argument("--max-memory-gb", type=positive_float, metavar="GB", help="memory limit of the recommendation")
    p.add_argument("--bootstrap", type=bounded_count("bootstrap"), default=200, metavar="N",
                   help=f"bootstrap resamples of the trend fits (default 200, at most {LIMITS['bootstrap'][0]:,})")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--json", action="store_true", help="print the written paths and the verdict as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from depthwidth.report import REPORT_FOLDER
    from depthwidth.report.build import build_report, default_hardware
    from depthwidth.report.data import load_study
    from depthwidth.report.export import write_report
    from depthwidth.report.recommend import Constraints
    from depthwidth.report.targets import resolve_target

    out_dir = Path(args.out) if args.out else Path(args.study) / REPORT_FOLDER
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"-o {out_dir}: exists and is not a folder")
    study = load_study(args.study)
    hardware = resolve_target(args.hardware, argument="--hardware") if args.hardware else default_hardware(study)
    constraints = Constraints(hardware=hardware, max_decode_ms=args.max_decode_ms, max_memory_gb=args.max_memory_gb)
    report = build_report(study, hardware=hardware, constraints=constraints, n_bootstrap=args.bootstrap,
                          seed=args.seed)
    files = write_report(report, out_dir)
    if args.json:
        print_json({"files": files.to_dict(), "recommendation": report.recommendation.to_dict(),
                    "trends": {"best_family": report.trends.best_family, "supported": report.trends.supported,
                               "warnings": list(report.trends.warnings)}})
        return 0
    out = sys.stdout
    out.write(f"report: {files.html}\n")
    out.write(f"also:   {files.markdown}, {files.csv}, {files.json} and {len(files.figures)} plots (PNG + SVG)\n")
    out.write(f"{report.recommendation.verdict}\n")
    if report.recommendation.trade:
        out.write(f"trade: {report.recommendation.trade}\n")
    problems = report.study.problem_runs
    if problems:
        out.write(f"{len(problems)} run(s) did not complete: "
                  + ", ".join(f"{r.label} {r.status}" for r in problems[:5]) + (" ..." if len(problems) > 5 else "")
                  + "\n")
    return 0
