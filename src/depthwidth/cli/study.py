"""`depthwidth study`: run a fair study from a spec file, resumably, and look at it.

    depthwidth study run SPEC [--dir DIR] [--executor local|ray] [--address ADDR] [--workers N] [--json]
    depthwidth study status DIR [--json]
    depthwidth study show DIR [RUN] [--json]
    depthwidth study validate SPEC [--json]
    depthwidth study repair DIR [--spec SPEC] [--json]
    depthwidth study export DIR --best|--all -o OUT [--force] [--json]
    depthwidth study import TABLE.csv --dir DIR [--columns d_model=hidden_size,...] [--vocab V ...] [--json]
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import nonneg_float, one_line_errors, positive_int
from depthwidth.errors import UserError
from depthwidth.present.terminal import console
from depthwidth.study.executors.base import EXECUTORS

HELP = "run a fair, resumable study of many shapes from a TOML spec (local or Ray), and show its state"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("study", help=HELP, description=HELP + ".")
    one_line_errors(p)
    sub = p.add_subparsers(dest="study_command", metavar="ACTION")
    r = one_line_errors(sub.add_parser("run", help="run or resume the study of a spec file",
                                       description="Run (or resume: finished runs are never repeated) a study."))
    r.add_argument("spec", metavar="SPEC", help="study spec (TOML); see examples/*.toml")
    r.add_argument("--dir", metavar="DIR", help="study folder (default studies/<name>)")
    r.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: this machine, in worker processes (default); ray: one Ray task per run")
    r.add_argument("--address", metavar="ADDR", help="join this Ray cluster (with --executor ray)")
    r.add_argument("--workers", type=positive_int, metavar="N",
                   help="local executor: runs at once in N worker processes (default: execution.workers, else "
                        "as many 1-thread runs as there are cores when the runs are small, else 1)")
    r.add_argument("--json", action="store_true", help="print the outcome and summary as one JSON object")
    r.set_defaults(run=run_cmd)
    s = one_line_errors(sub.add_parser("status", help="runs by state, best LR per shape, fairness, warnings"))
    s.add_argument("dir", metavar="DIR", help="study folder")
    s.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    s.set_defaults(run=status_cmd)
    w = one_line_errors(sub.add_parser("show", help="every run of a study, or one run with its curve"))
    w.add_argument("dir", metavar="DIR", help="study folder")
    w.add_argument("run_id", metavar="RUN", nargs="?", help="a run id (or a unique prefix of one)")
    w.add_argument("--all", action="store_true", help="include stored runs the current spec no longer asks for")
    w.add_argument("--json", action="store_true", help="print JSON")
    w.set_defaults(run=show_cmd)
    v = one_line_errors(sub.add_parser("validate", help="check a spec and list its runs; nothing runs"))
    v.add_argument("spec", metavar="SPEC", help="study spec (TOML)")
    v.add_argument("--json", action="store_true", help="print the expansion as one JSON object")
    v.set_defaults(run=validate_cmd)
    rp = one_line_errors(sub.add_parser("repair", help="rebuild a damaged study.sqlite from the run folders",
                                        description="Check the study's store and rebuild or repair it from the "
                                        "spec and the run folders; a damaged store is kept aside, never deleted."))
    rp.add_argument("dir", metavar="DIR", help="study folder")
    rp.add_argument("--spec", metavar="SPEC", help="the spec the study ran (default: the one the store or the "
                                                   "folder's spec.toml recorded)")
    rp.add_argument("--json", action="store_true", help="print what was found and done as one JSON object")
    rp.set_defaults(run=repair_cmd)
    e = one_line_errors(sub.add_parser("export", help="the recommended shape (or every shape) as Hugging Face models",
                                       description="Export trained shapes as transformers model folders."))
    e.add_argument("dir", metavar="STUDY", help="study folder")
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true",
                       help="the shape `depthwidth recommend STUDY` picks without limits, into DIR")
    which.add_argument("--all", action="store_true", help="every shape with a completed run, DIR/<budget>-<shape>")
    e.add_argument("-o", "--out", metavar="DIR", required=True, help="the folder to write")
    e.add_argument("--force", action="store_true", help="replace the model files in a non-empty folder")
    e.add_argument("--json", action="store_true", help="print what was written as one JSON object")
    e.set_defaults(run=export_cmd)
    _add_import(sub)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def _add_import(sub) -> None:
    from depthwidth.shapes.hardware import DTYPES
    from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, NORM_KINDS, POS_KINDS
    from depthwidth.study.importer import COLUMNS, PARAMS_KINDS, REQUIRED

    i = one_line_errors(sub.add_parser(
        "import", help="make a study folder from a CSV or JSON-lines table of runs trained elsewhere",
        description=f"Make a study folder from a table of finished runs (one row each; required columns: "
                    f"{', '.join(REQUIRED)}; optional: {', '.join(c for c in COLUMNS if c not in REQUIRED)}), so "
                    "that report, recommend and the shape-aware fits read it. Every row is checked first: a bad "
                    "cell is one line naming its row and column, and nothing is written."))
    i.add_argument("table", metavar="TABLE", help="a .csv (header row) or .jsonl table of runs")
    i.add_argument("--dir", metavar="DIR", required=True, help="the study folder to make (must not hold a study)")
    i.add_argument("--columns", metavar="MAP", help="our names for the table's columns: d_model=hidden_size,...")
    i.add_argument("--name", metavar="NAME", help="the study's name (default: from the table's file name)")
    c = i.add_argument_group("conventions of every row's shape (what the table does not say)")
    c.add_argument("--ffn", choices=FFN_KINDS, default="gelu")
    c.add_argument("--norm", choices=NORM_KINDS, default="layernorm")
    c.add_argument("--bias", choices=BIAS_KINDS, default="none")
    c.add_argument("--pos", choices=POS_KINDS, default="learned")
    tie = c.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=True,
                     help="LM head shares the embedding (default)")
    tie.add_argument("--untied", dest="tied", action="store_false")
    c.add_argument("--vocab", type=positive_int, metavar="V", help="vocabulary, for a table without a vocab column")
    c.add_argument("--seq-len", type=positive_int, default=2048, metavar="T",
                   help="training sequence length and position table, without a seq_len column (default 2048)")
    c.add_argument("--head-dim", type=positive_int, default=64,
                   help="heads = d_model / this without n_heads (default 64)")
    c.add_argument("--params-kind", choices=PARAMS_KINDS, default="total", help="what the params column counts")
    c.add_argument("--tolerance", type=_fraction, default=0.02,
                   help="largest difference of a given params or flops from the shape's (default 2%%)")
    m = i.add_argument_group("a decode_ms column")
    m.add_argument("--hardware", metavar="NAME", help="the row of `depthwidth hw list` decode_ms was measured on")
    m.add_argument("--context", type=positive_int, metavar="T", help="cached tokens of those measurements "
                   "(default: half the sequence length)")
    m.add_argument("--dtype", choices=DTYPES, default="bf16", help="their dtype (default bf16)")
    i.add_argument("--min-tokens-per-param", type=nonneg_float, metavar="R",
                   help="the fits of the report leave out runs below R tokens per non-embedding parameter (the "
                        "study's [report] min_tokens_per_param; default 4, as published ladders)")
    i.add_argument("--json", action="store_true", help="print what was imported as one JSON object")
    i.set_defaults(run=import_cmd)


def _fraction(text: str) -> float:
    from depthwidth.cli.plan import fraction

    return fraction(text)


def import_cmd(args: argparse.Namespace) -> int:
    from depthwidth.study.imported import import_runs
    from depthwidth.study.importer import Conventions, parse_columns

    conventions = Conventions(ffn=args.ffn, norm=args.norm, bias=args.bias, pos=args.pos, tied=args.tied,
                              vocab=args.vocab, seq_len=args.seq_len, head_dim=args.head_dim,
                              params_kind=args.params_kind, tolerance=args.tolerance)
    report = import_runs(args.table, args.dir, columns=parse_columns(args.columns), conventions=conventions,
                         name=args.name, hardware=args.hardware, context=args.context, dtype=args.dtype,
                         min_tokens_per_param=args.min_tokens_per_param)
    if args.json:
        print_json(report.to_dict())
        return 0
    from depthwidth.present.prescription import import_lines

    out = console()
    for line in import_lines(report):
        out.print(line, markup=False, highlight=False)
    return 0


def _check_executor(args) -> None:
    if args.address and args.executor != "ray":
        raise UserError("--address joins a Ray cluster; use it with --executor ray")
    if getattr(args, "workers", None) is not None and args.executor != "local":
        raise UserError("--workers sets the local executor's processes; with --executor ray, Ray places the runs")


def run_with_display(spec, *, study_dir, executor: str, address: str | None, quiet: bool,
                     workers: int | None = None):
    """Run a study with the live display (unless quiet); returns (RunReport, StudySummary)."""
    from depthwidth.present.progress import StudyProgress
    from depthwidth.study import Store, run_study, summarize

    with StudyProgress(enabled=not quiet) as display:
        report = run_study(spec, study_dir=study_dir, executor=executor, address=address, on_event=display,
                           workers=workers)
    with Store.open(report.study_dir) as store:
        return report, summarize(store)


def run_cmd(args: argparse.Namespace) -> int:
    _check_executor(args)
    report, summary = run_with_display(args.spec, study_dir=args.dir, executor=args.executor, address=args.address,
                                       quiet=args.json, workers=args.workers)
    if args.json:
        print_json({"run": report.to_dict(), "summary": summary.to_dict()})
        return 0 if not report.failed else 1
    from depthwidth.cli.closing import print_closing
    from depthwidth.present.study import run_report_line

    out = console()
    out.print(run_report_line(report), markup=False)
    print_closing(out, summary)
    out.print(f"the full table: depthwidth study status {report.study_dir}; the report: depthwidth report "
              f"{report.study_dir}", markup=False)
    return 0 if not report.failed else 1


def status_cmd(args: argparse.Namespace) -> int:
    from depthwidth.study import Store, is_running, summarize
    from depthwidth.study.eta import read_live, running_runs

    with Store.open(args.dir) as store:
        live = is_running(args.dir)  # else the rows marked running were interrupted: nothing is in flight
        summary = summarize(store, running=live)
        runs = store.runs()
        running = running_runs(store, live=read_live(args.dir)) if live else []
    if args.json:
        # "running" stays the summary's bool (a driver is live); the runs in flight are "running_runs"
        print_json(summary.to_dict() | {"running_runs": [r.to_dict() for r in running]})
        return 0
    from depthwidth.present.study import print_summary

    print_summary(console(), summary, runs, running)
    return 0


def show_cmd(args: argparse.Namespace) -> int:
    from depthwidth.study import Store

    with Store.open(args.dir) as store:
        if args.run_id is None:
            runs = store.runs(in_spec=None if args.all else True)
            results = {r.run_id: r for r in store.results(in_spec=None)}
            if args.json:
                from depthwidth.study.baselines import study_baselines

                found = study_baselines(store.dir, store.spec())
                print_json({"baselines": None if found is None else found.to_dict(),
                            "runs": [r.to_dict() | {"val_loss": getattr(results.get(r.run_id), "val_loss", None)}
                                     for r in runs]})
                return 0
            from depthwidth.present.study import baselines_line, runs_table
            from depthwidth.study.baselines import study_baselines

            console().print(baselines_line(study_baselines(store.dir, store.spec())), markup=False)
            console().print(runs_table(runs, results))
            return 0
        run = store.run(args.run_id)
        result = store.result(run.run_id)
        curve = store.curves(run.run_id)
        errors = store.attempt_errors(run.run_id)
    if args.json:
        print_json({"run": run.to_dict(), "result": None if result is None else result.to_dict(),
                    "curve": [p.to_dict() for p in curve],
                    "attempt_errors": [{"attempt": a, "at": t, "message": m} for a, t, m in errors]})
        return 0
    from depthwidth.present.study import print_run

    print_run(console(), run, result, curve, errors)
    return 0


def export_cmd(args: argparse.Namespace) -> int:
    from depthwidth.cli.export import export_line
    from depthwidth.report.model_export import export_study

    results = export_study(args.dir, args.out, best=args.best, overwrite=args.force)
    if args.json:
        print_json({"exports": [r.to_dict() for r in results]})
        return 0
    for result in results:
        print(export_line(result))
    return 0


def validate_cmd(args: argparse.Namespace) -> int:
    from depthwidth.study import prepare

    expansion = prepare(args.spec)
    if args.json:
        print_json(expansion.to_dict())
        return 0
    from depthwidth.present.study import print_validation

    print_validation(console(), expansion)
    return 0


def repair_cmd(args: argparse.Namespace) -> int:
    from depthwidth.study.repair import repair_study

    report = repair_study(args.dir, spec=args.spec)
    if args.json:
        print_json(report.to_dict())
        return 0
    from depthwidth.present.study import repair_lines

    out = console()
    for line in repair_lines(report):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0
