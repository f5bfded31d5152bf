"""`depthwidth check`: does a parametrization do what it promises on this code, this machine?

    depthwidth check coord --widths 64,128,256 --depths 2,8,32 --parametrization sp,completep --steps 10
    depthwidth check coord --widths 64 --depths 2,4,8,16,32 --json --plot coord.png
    depthwidth check transfer --widths 64,128,256 --depths 2,4,8,16 --parametrization sp,completep --steps 200

`coord` trains every width x depth for a few steps and prints the RMS of each layer's activations, the
logits and their change since initialisation (the coordinate check); flat across sizes is what muP
(width) and CompleteP (width and depth) promise, SP grows. `transfer` trains a log grid of learning rates
on every width (at the first depth) and every depth (at the first width) and prints how many grid steps the
best learning rate moves. Base sizes are the smallest width and depth (coord) or the first ones (transfer).
"""

from __future__ import annotations

import argparse
import sys

from depthwidth.cli import print_json
from depthwidth.cli.common import int_list, one_line_errors, positive_float, positive_int
from depthwidth.errors import UserError
from depthwidth.shapes.parametrization import PARAMETRIZATIONS

HELP = "check a parametrization: coordinate sizes across width and depth, and learning-rate transfer"


def name_list(text: str) -> tuple[str, ...]:
    """argparse type: 'sp,completep' -> ('sp', 'completep'), each a known parametrization."""
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in items if t not in PARAMETRIZATIONS]
    if not items or bad:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of {', '.join(PARAMETRIZATIONS)}")
    return tuple(dict.fromkeys(items))


def _common(p: argparse.ArgumentParser, *, widths, depths, steps: int) -> None:
    p.add_argument("--widths", type=int_list, default=widths, metavar="H,H,...",
                   help=f"d_model values (default {','.join(map(str, widths))}; multiples of --head-dim)")
    p.add_argument("--depths", type=int_list, default=depths, metavar="L,L,...",
                   help=f"n_layers values (default {','.join(map(str, depths))})")
    p.add_argument("--parametrization", type=name_list, default=("sp", "completep"), metavar="P,P,...",
                   help=f"{', '.join(PARAMETRIZATIONS)} (default sp,completep)")
    p.add_argument("--steps", type=positive_int, default=steps, help=f"training steps per model (default {steps})")
    p.add_argument("--head-dim", type=positive_int, default=16, help="fixed head size; heads = width / head-dim")
    p.add_argument("--corpus", default="shakespeare", help="named corpus or a text file (default shakespeare)")
    p.add_argument("--seq-len", type=positive_int, default=64)
    p.add_argument("--batch-size", type=positive_int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.add_argument("--plot", metavar="FILE", help="also draw the figure (.png, .svg or .pdf)")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("check", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    sub = p.add_subparsers(dest="check_command", metavar="CHECK")
    coord = sub.add_parser("coord", help="RMS of activations, logits and updates across widths and depths")
    one_line_errors(coord)
    _common(coord, widths=(64, 128, 256), depths=(2, 8, 32), steps=10)
    coord.add_argument("--lr", type=positive_float, default=1e-2, help="constant learning rate (default 0.01)")
    coord.set_defaults(run=run_coord)
    transfer = sub.add_parser("transfer", help="a log grid of learning rates over widths and depths")
    one_line_errors(transfer)
    _common(transfer, widths=(64, 128, 256), depths=(2, 4, 8, 16), steps=200)
    transfer.add_argument("--lr-min", type=positive_float, default=2**-10, help="smallest LR (default 2^-10)")
    transfer.add_argument("--lr-max", type=positive_float, default=2**-3, help="largest LR (default 2^-3)")
    transfer.add_argument("--lrs", type=positive_int, default=8, help="grid points, log-spaced (default 8)")
    transfer.add_argument("--eval-windows", type=positive_int, default=32, help="validation windows (default 32)")
    transfer.set_defaults(run=run_transfer)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def _plot_path(args):
    if args.plot is None:
        return None
    from depthwidth.present.check import check_plot_path

    return check_plot_path(args.plot)  # refused before any training


def run_coord(args) -> int:
    from depthwidth.train.coord import check_sizes, coord_check

    check_sizes(args.widths, args.depths, head_dim=args.head_dim, steps=args.steps)
    plot = _plot_path(args)
    progress = None if args.json else (
        lambda pt: print(f"  {pt.parametrization} width {pt.width} depth {pt.depth}: loss {pt.loss:.3f}",
                         file=sys.stderr))
    result = coord_check(widths=args.widths, depths=args.depths, parametrizations=args.parametrization,
                         steps=args.steps, lr=args.lr, head_dim=args.head_dim, corpus=args.corpus,
                         seq_len=args.seq_len, batch_size=args.batch_size, seed=args.seed, threads=args.threads,
                         progress=progress)
    from depthwidth.present.check import coord_lines, plot_coord

    if plot is not None:
        plot_coord(result, plot)
    if args.json:
        print_json({**result.to_dict(), "plot": str(plot) if plot else None})
        return 0
    print("\n".join(coord_lines(result)))
    if plot is not None:
        print(f"plot: {plot}")
    return 0


def run_transfer(args) -> int:
    from depthwidth.train.transfer import check_sweep, log_grid, transfer_sweep

    lrs = log_grid(args.lr_min, args.lr_max, args.lrs)
    check_sweep(widths=args.widths, depths=args.depths, parametrizations=args.parametrization, lrs=lrs,
                steps=args.steps, head_dim=args.head_dim)
    plot = _plot_path(args)
    if args.steps < 2:
        raise UserError(f"--steps {args.steps}: a transfer run needs at least 2 steps (one of warmup)")
    progress = None if args.json else (
        lambda pz, w, d, lr, loss: print(f"  {pz} width {w} depth {d} lr {lr:.3g}: val loss {loss:.3f}",
                                         file=sys.stderr))
    result = transfer_sweep(widths=args.widths, depths=args.depths, parametrizations=args.parametrization, lrs=lrs,
                            steps=args.steps, head_dim=args.head_dim, corpus=args.corpus, seq_len=args.seq_len,
                            batch_size=args.batch_size, eval_windows=args.eval_windows, seed=args.seed,
                            threads=args.threads, progress=progress)
    from depthwidth.present.check import plot_transfer, transfer_lines

    if plot is not None:
        plot_transfer(result, plot)
    if args.json:
        print_json({**result.to_dict(), "plot": str(plot) if plot else None})
        return 0
    print("\n".join(transfer_lines(result)))
    if plot is not None:
        print(f"plot: {plot}")
    return 0
