"""`depthwidth demo`: the built-in study (`depthwidth/study/demo.toml`, also `examples/demo.toml`) - an
iso-parameter family of five shapes trained under one protocol on Shakespeare, with batch-1 latency -
then the comparison table and a report in the study folder. Running it again reuses every finished run."""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors
from depthwidth.study.executors.base import EXECUTORS

HELP = ("run the built-in demo study (a ladder of 3 scales x 4 shapes, a few minutes on a CPU) and report it")
DEFAULT_DIR = "demo-study"
#: bootstrap resamples of the demo's own report (`depthwidth report DIR` redraws it with the default 200)
DEMO_BOOTSTRAP = 100


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", help=HELP, description=HELP + ".")
    one_line_errors(p)
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR", help=f"study folder (default ./{DEFAULT_DIR})")
    p.add_argument("--executor", choices=EXECUTORS, default="local", help="where the runs execute")
    p.add_argument("--address", metavar="ADDR", help="join this Ray cluster (with --executor ray)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from depthwidth.cli.closing import print_closing
    from depthwidth.cli.study import _check_executor, run_with_display
    from depthwidth.present.terminal import console
    from depthwidth.report import REPORT_FOLDER
    from depthwidth.report.build import report_for
    from depthwidth.report.export import write_report
    from depthwidth.study.demo import demo_spec

    _check_executor(args)
    ran, summary = run_with_display(demo_spec(), study_dir=args.dir, executor=args.executor, address=args.address,
                                    quiet=args.json)
    report = report_for(ran.study_dir, n_bootstrap=DEMO_BOOTSTRAP)
    files = write_report(report, Path(ran.study_dir) / REPORT_FOLDER)
    written = [files.html, files.markdown, files.csv, files.json]
    if args.json:
        print_json({"run": ran.to_dict(), "summary": summary.to_dict(), "report": [str(p) for p in written]})
        return 0 if not ran.failed else 1
    out = console()
    out.print(f"demo: {ran.completed + ran.diverged} runs done now, {ran.skipped} reused from {ran.study_dir}",
              markup=False)
    print_closing(out, summary, report=report, files=files)
    return 0 if not ran.failed else 1
