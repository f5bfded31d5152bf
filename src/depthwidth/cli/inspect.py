"""`depthwidth inspect`: does a model use its depth? Per block: the loss increase when it is skipped (and
each adjacent pair), block influence and angular distances of the residual stream, the logit lens, the
size of each attention and MLP update against the stream, and the effective depth (blocks kept by a
greedy removal within --tolerance nats).

    depthwidth inspect runs/a                         # the run's own validation windows, 16 per slice
    depthwidth inspect runs/a --text notes.txt --json
    depthwidth inspect --hf-model hf/a --text notes.txt --plot layers.png
    depthwidth inspect --hf-model hf/a --data shakespeare   # an export of ours with the byte tokenizer
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors
from depthwidth.diagnose.limits import DEFAULT_TOLERANCE, DEFAULT_WINDOWS
from depthwidth.errors import UserError

HELP = "per-layer diagnostics of a trained run or HF folder: drop-a-layer, logit lens, effective depth"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("inspect", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="a run folder of depthwidth train (or its checkpoint)")
    p.add_argument("--hf-model", metavar="HF_DIR", help="a local Hugging Face model folder instead of a run")
    p.add_argument("--data", metavar="CORPUS", help="HF folder exported by depthwidth (byte tokenizer): this corpus's "
                                                    "validation split")
    p.add_argument("--text", metavar="FILE", help="evaluate on this text file (the model's own tokenizer)")
    p.add_argument("--windows", metavar="N", type=int, default=DEFAULT_WINDOWS,
                   help=f"windows per validation slice, or of the text (default {DEFAULT_WINDOWS})")
    p.add_argument("--tolerance", metavar="X", type=float, default=DEFAULT_TOLERANCE,
                   help=f"nats of loss the effective depth may give up (default {DEFAULT_TOLERANCE})")
    p.add_argument("--plot", metavar="FILE", help="write a PNG of the per-layer curves")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if bool(args.run_dir) == bool(args.hf_model):
        raise UserError("give RUN_DIR (a trained run) or --hf-model HF_DIR, one of them")
    if args.run_dir:
        from depthwidth.artifact.folder import checkpoint_file

        checkpoint_file(args.run_dir)  # a pipe, a device or a missing file: one line before torch is imported
    from depthwidth.diagnose.inspect import inspect_hf, inspect_run

    if args.hf_model:
        result = inspect_hf(args.hf_model, text=args.text, corpus=args.data, windows=args.windows,
                            tolerance=args.tolerance)
    else:
        if args.data:
            raise UserError("--data is for --hf-model; a run is inspected on its own validation windows or --text")
        result = inspect_run(args.run_dir, windows=args.windows, text=args.text, tolerance=args.tolerance)
    out = result.to_dict()
    if args.plot:
        from depthwidth.present.inspect import plot_layers

        plot_layers(out, args.plot)
    if args.json:
        print_json(out)
        return 0
    from depthwidth.present.inspect import layer_table, summary_line
    from depthwidth.present.terminal import console

    c = console()
    c.print(layer_table(out))
    c.print(summary_line(out))
    if args.plot:
        c.print(f"plot: {args.plot}")
    return 0
