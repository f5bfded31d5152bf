"""`depthwidth recommend`: the best-loss shape of a study under a decode-latency and memory limit, the
trade it makes against the unconstrained best, and whether the loss differences exceed seed noise.

    depthwidth recommend demo-study --max-decode-ms 2 --hardware h100
    depthwidth recommend demo-study --max-decode-ms 1.5 --hardware study --max-memory-gb 0.01 --json
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors, positive_float, positive_int
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
    p.add_argument("--budget", metavar="LABEL", help="only shapes of this budget group")
    p.add_argument("--json", action="store_true", help="print the recommendation as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from depthwidth.report.build import default_hardware
    from depthwidth.report.data import load_study
    from depthwidth.report.recommend import Constraints, recommend
    from depthwidth.report.targets import resolve_target

    study = load_study(args.study)
    hardware = resolve_target(args.hardware, argument="--hardware") if args.hardware else default_hardware(study)
    constraints = Constraints(hardware=hardware, max_decode_ms=args.max_decode_ms, max_memory_gb=args.max_memory_gb,
                              memory=args.memory, context=args.context, dtype=args.dtype, group=args.budget)
    p = study.protocol
    rec = recommend(study.results, constraints, seq_len=p.seq_len or None, batch_size=p.batch_size or 1)
    if args.json:
        print_json(rec.to_dict())
        return 0 if rec.chosen is not None else 1
    print_recommendation(rec)
    return 0 if rec.chosen is not None else 1


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
