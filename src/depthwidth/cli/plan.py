"""`depthwidth plan`: a family of shapes at equal parameters or equal training compute, with their costs.

    depthwidth plan --params 124M
    depthwidth plan --params 85M --non-embedding --count 7 --hardware a100 --json
    depthwidth plan --flops 1e19 --tokens-per-param 20 --seq-len 2048 --plot family.png
    depthwidth plan --params 1M --vocab 256 --max-seq-len 128 --align 16 --head-dim 16 --hardware measured

The numbers come from `depthwidth.shapes.evaluate.plan`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import re

from depthwidth.cli import print_json
from depthwidth.errors import UserError
from depthwidth.cli.common import add_pipeline_args, add_precision_args, int_list, one_line_errors, positive_int
from depthwidth.shapes.hardware import DTYPES
from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, NORM_KINDS, POS_KINDS

_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
#: the largest budget amount read: 1e30 FLOPs is about a million times the largest training runs of
#: 2024-2025 (~5e25 FLOPs), parameters and tokens stay far below it
MAX_AMOUNT = 1e30
#: plan's default conventions: Shape's defaults (nanoGPT bias=False) with GPT-2's vocabulary padded to
#: a multiple of 64 (50257 -> 50304, as nanoGPT does), so the planned shapes are hardware-friendly.
PLAN_VOCAB = 50304


def amount(text: str) -> float:
    """argparse type: '124M', '1.3B', '350k', '1e19', '2.5e9' -> a positive, finite number (at most
    `MAX_AMOUNT`: larger values, or ones that overflow to infinity such as 1e400, are refused)."""
    match = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount like 124M, 1.3B or 1e19")
    value = float(match.group(1)) * _SUFFIX[match.group(2)]
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    if not value <= MAX_AMOUNT:
        raise argparse.ArgumentTypeError(f"{text} is beyond {MAX_AMOUNT:.0e}, more than any model or training "
                                         "run could use")
    return value


def fraction(text: str) -> float:
    """argparse type: '5%' or '0.05' -> 0.05."""
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction like 0.05 or 5%") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be between 0 and 1 (or 0% and 100%)")
    return value


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """Hardware and workload flags shared by plan and compare."""
    w = parser.add_argument_group("hardware and workload")
    w.add_argument("--hardware", default="h100", metavar="NAME",
                   help="a row of `depthwidth hw list` (default h100), 'measured' for this machine's "
                        "profile from `depthwidth hw measure`, or a profile JSON path")
    w.add_argument("--dtype", default="bf16", choices=DTYPES,
                   help="inference compute dtype of the latency columns (default bf16)")
    w.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (default 1)")
    add_pipeline_args(w)
    add_precision_args(w)
    w.add_argument("--seq-len", type=positive_int, metavar="T",
                   help="training sequence, prefill prompt and decode context (default: max_seq_len)")
    w.add_argument("--batch", type=positive_int, default=1, metavar="B",
                   help="sequences per device: training memory, KV cache and the tokens/s column (default 1)")


def pipeline_workload(args: argparse.Namespace) -> dict:
    """The `Workload` fields of the pipeline and precision flags (plan and compare)."""
    return {"pp": args.pp, "virtual_stages": args.virtual_stages, "microbatches": args.microbatches,
            "convention": args.convention, "residual_dtype": args.residual_dtype, "grad_dtype": args.grad_dtype}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="shapes at equal parameters or compute, with their costs",
        description="A family of shapes spanning depth versus width at equal parameters (--params) or equal "
        "training compute (--flops), widths on an alignment grid, depth solved exactly; per member the "
        "parameters and error, FLOPs, memory, roofline latency and lint findings.",
    )
    one_line_errors(p)
    b = p.add_argument_group("budget (one of --params or --flops)")
    b.add_argument("--params", type=amount, metavar="N", help="total parameters, e.g. 124M")
    b.add_argument("--non-embedding", action="store_true",
                   help="--params (and N in --tokens-per-param) counts non-embedding parameters (Kaplan)")
    b.add_argument("--flops", type=amount, metavar="C", help="training FLOPs budget, e.g. 1e19")
    b.add_argument("--tokens-per-param", type=amount, metavar="R", help="training tokens per parameter (e.g. 20)")
    b.add_argument("--tokens", type=amount, metavar="D", help="training tokens (instead of --tokens-per-param)")
    f = p.add_argument_group("family")
    f.add_argument("--count", type=positive_int, default=5, help="members (default 5)")
    f.add_argument("--align", type=positive_int, default=64, help="widths are multiples of this (default 64)")
    f.add_argument("--head-dim", type=positive_int, default=64, help="head size; heads = width / head-dim (default 64)")
    f.add_argument("--tolerance", type=fraction, default=0.05, help="largest budget error kept (default 5%%)")
    f.add_argument("--depths", type=int_list, metavar="L,L,...", help="solve the width for each of these depths")
    f.add_argument("--widths", type=int_list, metavar="H,H,...", help="solve the depth for each of these widths")
    f.add_argument("--min-layers", type=positive_int, default=2, help="shallowest member (default 2)")
    f.add_argument("--aspect-range", default="8,512", metavar="LO,HI",
                   help="d_model/n_layers range searched (default 8,512)")
    c = p.add_argument_group("conventions of every member")
    c.add_argument("--like", metavar="PRESET", help="take conventions (vocab, ffn, norm, ...) from a preset")
    c.add_argument("--vocab", type=positive_int, help=f"vocabulary (default {PLAN_VOCAB}, GPT-2's padded)")
    c.add_argument("--ffn", choices=FFN_KINDS)
    c.add_argument("--norm", choices=NORM_KINDS)
    c.add_argument("--bias", choices=BIAS_KINDS)
    c.add_argument("--pos", choices=POS_KINDS)
    c.add_argument("--max-seq-len", type=positive_int, metavar="T")
    c.add_argument("--kv-group", type=positive_int, metavar="G", help="query heads per kv head (GQA; default 1)")
    tie = c.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_const", const=True)
    tie.add_argument("--untied", dest="tied", action="store_const", const=False)
    add_workload_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--plot", metavar="PATH", help="draw the trade-off picture to PATH (.png, .svg, .pdf)")
    p.set_defaults(run=run)


def base_shape(args: argparse.Namespace):
    from depthwidth.shapes.shape import Shape

    if args.like:
        from depthwidth.shapes.presets import get_preset

        base = get_preset(args.like).shape
    else:
        base = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=PLAN_VOCAB)
    changes = {k: v for k, v in (("vocab_size", args.vocab), ("ffn", args.ffn), ("norm", args.norm),
                                 ("bias", args.bias), ("pos", args.pos), ("max_seq_len", args.max_seq_len),
                                 ("tie_embeddings", args.tied)) if v is not None}
    base = base.with_(**changes) if changes else base
    if args.kv_group:
        heads = args.kv_group
        base = Shape(**{**base.to_dict(), "d_model": 64 * heads, "n_heads": heads, "n_kv_heads": 1, "head_dim": 64,
                        "d_ff": None})
    return base


def _aspect(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"--aspect-range {text!r}: expected LO,HI such as 8,512") from None
    return lo, hi


def plan_result(args: argparse.Namespace):
    """The `PlanResult` of parsed plan flags (the one reading of them: `run` and `depthwidth explore` call it)."""
    from depthwidth.machine import resolve_hardware
    from depthwidth.shapes.checks import check_one_budget
    from depthwidth.shapes.evaluate import Workload, plan

    check_one_budget(params=args.params, flops=args.flops, tokens=args.tokens, tokens_per_param=args.tokens_per_param,
                     names=("--params", "--flops", "--tokens", "--tokens-per-param"))
    base = base_shape(args)
    hardware = resolve_hardware(args.hardware, argument="--hardware")
    workload = Workload(seq_len=args.seq_len or base.max_seq_len, batch=args.batch, dtype=args.dtype, tp=args.tp,
                        **pipeline_workload(args))
    if workload.seq_len > base.max_seq_len:
        raise UserError(f"--seq-len {workload.seq_len} exceeds the members' max_seq_len {base.max_seq_len}; "
                         "raise --max-seq-len")
    return plan(
        hardware=hardware, workload=workload, base=base, params=args.params, non_embedding=args.non_embedding,
        train_flops=args.flops, tokens_per_param=args.tokens_per_param, tokens=args.tokens, count=args.count,
        align=args.align, head_dim=args.head_dim, depths=args.depths, widths=args.widths,
        tolerance=args.tolerance, min_layers=args.min_layers, aspect_range=_aspect(args.aspect_range),
    )


def plan_json(result) -> dict:
    """What `plan --json` prints for a `PlanResult` (without --plot)."""
    data = result.to_dict()
    for member in data["members"]:
        member["preset"] = None  # the keys of `calc --json`
    return data


def run(args: argparse.Namespace) -> int:
    if args.plot:  # a target that cannot be written is refused before anything is planned
        from pathlib import Path

        from depthwidth.present.plan_plot import check_plot_target

        check_plot_target(Path(args.plot))
    result = plan_result(args)
    data = plan_json(result)
    if args.plot:
        from depthwidth.present.plan_plot import plot_plan

        data["plot"] = str(plot_plan(result, args.plot))
    if args.json:
        print_json(data)
        return 0
    from depthwidth.present.plan import plan_notes, plan_tables
    from depthwidth.present.terminal import console as make_console

    console = make_console()
    for table in plan_tables(data):
        console.print(table)
    for line in plan_notes(data):
        console.print(line, style="dim", highlight=False)
    if args.plot:
        console.print(f"plot: {data['plot']}")
    return 0
