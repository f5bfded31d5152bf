"""`depthwidth probe`: look at the synthetic probe tasks, and measure one shape's memorisation capacity.

    depthwidth probe show multihop --difficulty 2 -n 3
    depthwidth probe show hops --difficulty 2 -n 3      # letters | the 2-hop target of each ('~': none)
    depthwidth probe capacity --shape L2-H64-A4 --pos rope --vocab 256 --facts 256,1024,4096

Train on a probe with `depthwidth train --probe multihop`, or mix probes into a study's corpus
("shakespeare+probe:multihop"); the report then shows accuracy by difficulty against d_model/n_layers.
"""

from __future__ import annotations

import argparse
import sys

from depthwidth.cli import print_json
from depthwidth.errors import UserError
from depthwidth.cli.common import (add_shape_args, int_list, nonneg_int, one_line_errors, positive_float,
                                   positive_int, shape_from_args)
from depthwidth.data.probes import PROBE_SPLITS, PROBES

HELP = "show the synthetic probe tasks, or measure a shape's memorisation capacity in bits per parameter"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("probe", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    sub = p.add_subparsers(dest="probe_command", metavar="ACTION")
    show = sub.add_parser("show", help="print examples of a probe (prompt | answer)")
    one_line_errors(show)
    show.add_argument("name", help=f"one of {', '.join(PROBES)}")
    show.add_argument("--difficulty", type=nonneg_int, default=2,
                      help="k hops (hops: from 0), n pairs, n facts, n digits or bits")
    show.add_argument("-n", type=positive_int, default=5, help="how many examples (default 5)")
    show.add_argument("--seed", type=int, default=0)
    show.add_argument("--split", choices=PROBE_SPLITS, default="train")
    show.set_defaults(run=run_show)
    cap = sub.add_parser("capacity", help="accuracy on memorised facts as their number grows, and bits per parameter")
    one_line_errors(cap)
    add_shape_args(cap)
    cap.add_argument("--facts", type=int_list, default=(256, 1024, 4096), metavar="N,N,...",
                     help="numbers of facts, one training run each (default 256,1024,4096)")
    cap.add_argument("--repeats", type=positive_int, default=20, help="copies of each fact in the text (default 20)")
    cap.add_argument("--epochs", type=positive_float, default=4.0, help="passes over the text (default 4)")
    cap.add_argument("--lr", type=positive_float, default=3e-3)
    cap.add_argument("--seq-len", type=positive_int, default=64)
    cap.add_argument("--batch-size", type=positive_int, default=32)
    cap.add_argument("--threads", type=positive_int)
    cap.add_argument("--json", action="store_true")
    cap.set_defaults(run=run_capacity)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def run_show(args) -> int:
    from depthwidth.data.probes import generate

    for ex in generate(args.name, difficulty=args.difficulty, n=args.n, seed=args.seed, split=args.split)[: args.n]:
        print(f"{ex.prompt} | {ex.answer}")
    return 0


def run_capacity(args) -> int:
    from depthwidth.train import TrainConfig
    from depthwidth.train.capacity import capacity_curve, capacity_runs

    if args.vocab is None:
        args.vocab = 256
    if args.max_seq_len is None and args.preset is None and args.hf is None:
        args.max_seq_len = args.seq_len
    shape = shape_from_args(args)
    if shape.max_seq_len < args.seq_len:
        raise UserError(f"--seq-len {args.seq_len} exceeds the shape's max_seq_len={shape.max_seq_len}")
    config = TrainConfig(corpus="probe:facts", seq_len=args.seq_len, batch_size=args.batch_size, steps=1, lr=args.lr,
                         warmup=0, weight_decay=0.0, threads=args.threads, eval_windows=8)
    capacity_runs(fact_counts=args.facts, config=config, repeats=args.repeats, epochs=args.epochs)  # before any run
    progress = None if args.json else (lambda i, n: print(f"training {i + 1}/{n} ...", file=sys.stderr))
    points = capacity_curve(shape, fact_counts=args.facts, config=config, repeats=args.repeats,
                            epochs=args.epochs, progress=progress)
    from depthwidth.shapes.params import count_params

    params = count_params(shape).total
    if args.json:
        print_json({"shape": shape.to_dict(), "params": params, "points": [p.to_dict() for p in points]})
        return 0
    from depthwidth.present.probe import capacity_lines

    print("\n".join(capacity_lines(shape.label(), params=params, points=points)))
    return 0
