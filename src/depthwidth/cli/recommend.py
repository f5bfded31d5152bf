"""`depthwidth recommend`: the best-loss shape of a study under a decode-latency and memory limit, the
trade it makes against the unconstrained best, and whether the loss differences exceed seed noise; with
--target-params, a prescription at a scale the study did not train: the depth and width a shape-aware
law fitted on the study puts lowest, the flat basin around it, and the fastest of the basin under the limits
(`depthwidth.report.shape_law`).

    depthwidth recommend demo-study --max-decode-ms 2 --hardware h100
    depthwidth recommend demo-study --max-decode-ms 1.5 --hardware study --max-memory-gb 0.01 --json
    depthwidth recommend demo-study --target-params 1.3B --target-tokens 26B --hardware h100 --max-decode-ms 8
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors, positive_float, positive_int
from depthwidth.cli.plan import amount, fraction
from depthwidth.errors import UserError
from depthwidth.report.fit_shape import FORM_CHOICES
from depthwidth.report.limits import LIMITS, bounded_count
from depthwidth.report.targets import MEMORY_KINDS, SERVING_DTYPES, STUDY

HELP = "pick a shape of a study under a latency / memory limit, with the trade and the noise stated"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("recommend", help=HELP, description=HELP + ".")
    one_line_errors(p)
    p.add_argument("study", metavar="STUDY", help="study folder (holds study.sqlite)")
    p.add_argument("--max-decode-ms", type=positive_float, metavar="MS",
                   help="limit on batch-1 decode latency per token, in ms")
    p.add_argument("--hardware", metavar="NAME",
                   help="target hardware: a row of `depthwidth hw list` (predicted unless the study measured on "
                        f"it) or '{STUDY}' (the study's own measurements, on the machine it ran on); default: the "
                        "study's hardware")
    p.add_argument("--max-memory-gb", type=positive_float, metavar="GB", help="memory limit in GB (1e9 bytes)")
    p.add_argument("--memory", choices=MEMORY_KINDS, default="serving",
                   help="serving: weights + KV cache of one sequence (default); training: peak training memory")
    p.add_argument("--context", type=positive_int, metavar="T",
                   help="decode context length (default: the bench's context, else the study's seq_len)")
    p.add_argument("--dtype", choices=SERVING_DTYPES, default="bf16",
                   help="serving dtype of predictions and serving memory (default bf16)")
    p.add_argument("--group", "--budget", dest="budget", metavar="LABEL",
                   help="compare the shapes of this budget group (default: the largest scale's full-horizon group, "
                        "one per parametrization side by side)")
    p.add_argument("--json", action="store_true", help="print the recommendation as one JSON object")
    t = p.add_argument_group("a prescription at a target scale (a shape-aware law fitted on the study's runs)")
    t.add_argument("--target-params", type=amount, metavar="N", help="parameters of the model to train, e.g. 1.3B "
                   "(total; with --non-embedding, Kaplan's N)")
    t.add_argument("--non-embedding", action="store_true", help="--target-params counts non-embedding parameters")
    how = t.add_mutually_exclusive_group()
    how.add_argument("--target-tokens", type=amount, metavar="D", help="training tokens (default 20 per parameter)")
    how.add_argument("--target-flops", type=amount, metavar="C",
                     help="training FLOPs; each shape's tokens are C / its training FLOPs per token")
    t.add_argument("--form", choices=FORM_CHOICES, default="auto",
                   help="the law: auto (the form with the lowest held-out error, default) or one of them")
    t.add_argument("--seq-len", type=positive_int, metavar="T", help="training sequence and decode context at the "
                   "target (default: the study's sequence length)")
    t.add_argument("--align", type=positive_int, default=64, help="widths are multiples of this (default 64)")
    t.add_argument("--head-dim", type=positive_int, default=64, help="head size (default 64)")
    t.add_argument("--tp", type=positive_int, default=1,
                   help="tensor-parallel degree the heads must divide (default 1)")
    t.add_argument("--min-layers", type=positive_int, default=2, help="shallowest candidate (default 2)")
    t.add_argument("--aspect-range", default="4,512", metavar="LO,HI", help="d_model/n_layers of the candidates "
                   "(default 4,512)")
    t.add_argument("--tolerance", type=fraction, default=0.05,
                   help="largest parameter error of a candidate (default 5%%)")
    t.add_argument("--level", type=fraction, default=0.95, help="interval level (default 0.95)")
    t.add_argument("--bootstrap", type=bounded_count("bootstrap", minimum=0), default=200, metavar="B",
                   help=f"bootstrap resamples (default 200, at most {LIMITS['bootstrap'][0]:,})")
    t.add_argument("--splits", type=bounded_count("splits"), default=20, help="random 80/20 splits of the held-out "
                   f"score (default 20, at most {LIMITS['splits'][0]:,})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from depthwidth.report.data import load_study

    study = load_study(args.study)
    if args.target_params is not None:
        return run_prescription(args, study)
    rec = recommendation(args, study)
    if args.json:
        print_json(rec.to_dict())
        return 0 if rec.chosen is not None else 1
    print_recommendation(rec)
    return 0 if rec.chosen is not None else 1


def recommendation(args: argparse.Namespace, study):
    """The `Recommendation` of parsed recommend flags (without --target-params) for a loaded study: `run`
    and `depthwidth explore` call it."""
    from depthwidth.report.build import default_hardware
    from depthwidth.report.recommend import Constraints, recommend
    from depthwidth.report.targets import resolve_target

    if args.target_tokens is not None or args.target_flops is not None:
        raise UserError("--target-tokens and --target-flops describe a target scale: give --target-params with them")
    hardware = resolve_target(args.hardware, argument="--hardware") if args.hardware else default_hardware(study)
    constraints = Constraints(hardware=hardware, max_decode_ms=args.max_decode_ms, max_memory_gb=args.max_memory_gb,
                              memory=args.memory, context=args.context, dtype=args.dtype, group=args.budget)
    p = study.protocol
    return recommend(study.results, constraints, seq_len=p.seq_len or None, batch_size=p.batch_size or 1)


def print_recommendation(rec) -> None:
    from rich import box
    from rich.table import Table

    from depthwidth.present.terminal import console
    from depthwidth.present.units import nbytes, number, or_dash
    from depthwidth.report.targets import hardware_label

    out = console()
    table = Table(box=box.SIMPLE_HEAVY, title_justify="left",
                  title=f"Candidates on {hardware_label(rec.constraints.hardware)} (sorted by loss)")
    for name in ("budget", "shape", "loss", "± seeds", "decode ms", "source", f"{rec.constraints.memory} memory",
                 "meets limits"):
        table.add_column(name, justify="right" if name in ("loss", "± seeds", "decode ms") else "left")
    chosen = rec.chosen.result.key if rec.chosen else None
    for c in rec.candidates:
        r, t = c.result, c.target
        mark = "[bold green]<- recommended[/]" if r.key == chosen else ("yes" if c.feasible else "; ".join(c.reasons))
        table.add_row(r.group, r.shape_label, f"{r.val_loss:.4f}", or_dash(r.val_loss_std, ".4f"),
                      or_dash(t.decode_ms, number), t.decode_source, nbytes(t.memory_bytes), mark)
    out.print(table)
    out.print(rec.verdict, markup=False)
    if rec.trade:
        out.print(f"Trade: {rec.trade}.", markup=False)
    out.print(f"Noise: {rec.noise.description}", markup=False, style="dim")


def run_prescription(args: argparse.Namespace, study) -> int:
    law = prescription(args, study)
    if args.json:
        print_json(law.to_dict())
        return 0 if law.prescription.chosen is not None else 1
    from depthwidth.present.prescription import law_lines, prescription_table
    from depthwidth.present.terminal import console

    out = console()
    for line in law_lines(law):
        out.print(line, markup=False, highlight=False, style="dim" if line.startswith("warning") else None)
    out.print(prescription_table(law.prescription))
    out.print(law.prescription.verdict, markup=False, highlight=False)
    return 0 if law.prescription.chosen is not None else 1


def prescription(args: argparse.Namespace, study):
    """The `ShapeLaw` of parsed recommend flags with --target-params for a loaded study (UserError when the
    study gives no prescription): `run` and `depthwidth explore` call it."""
    from depthwidth.cli.plan import _aspect
    from depthwidth.report.build import default_hardware
    from depthwidth.report.prescribe import Limits, Target
    from depthwidth.report.shape_law import Planner, shape_law
    from depthwidth.report.targets import resolve_target

    if args.budget:
        raise UserError("--budget picks a group of measured shapes; a prescription fits every group of the study")
    hardware = resolve_target(args.hardware, argument="--hardware") if args.hardware else default_hardware(study)
    if hardware == STUDY:
        if args.hardware:
            raise UserError("--hardware study: a shape at the target scale was never measured on the study's machine; "
                            "name a row of `depthwidth hw list`")
        hardware = "h100"
    seq_len = args.seq_len or study.protocol.seq_len or 2048
    target = Target(params=args.target_params, non_embedding=args.non_embedding, tokens=args.target_tokens,
                    flops=args.target_flops, seq_len=seq_len)
    limits = Limits(hardware=hardware, max_decode_ms=args.max_decode_ms, max_memory_gb=args.max_memory_gb,
                    memory=args.memory, dtype=args.dtype, context=args.context)
    planner = Planner(align=args.align, head_dim=args.head_dim, tp=args.tp, min_layers=args.min_layers,
                      aspect_range=_aspect(args.aspect_range), tolerance=args.tolerance)
    law = shape_law(study, target=target, limits=limits, form=args.form, planner=planner, n_bootstrap=args.bootstrap,
                    level=args.level, n_splits=args.splits)
    if law.prescription is None:
        raise UserError(f"no prescription for {args.study}: {law.skipped}")
    return law
