"""`depthwidth compare A B ...`: shapes side by side with every `plan` quantity and the ratios to A.

    depthwidth compare L12-H768-A12 L24-H512-A8
    depthwidth compare gpt2-small mobilellm-125m --hardware a100 --seq-len 2048 --json
    depthwidth compare path/to/config.json L24-H1024-A16 --like llama-2-7b

Each argument is a preset name, a Hugging Face config (file or folder) or a compact shape string;
compact strings take their conventions from --like (default: Shape defaults, vocabulary 50257).
The numbers come from `depthwidth.shapes.evaluate.compare`; this module parses and prints.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from depthwidth.cli import print_json
from depthwidth.errors import UserError
from depthwidth.cli.calc import _preset_info
from depthwidth.cli.common import one_line_errors, positive_int
from depthwidth.cli.plan import add_workload_args, pipeline_workload

_COMPACT = re.compile(r"^(?:(?:KV|L|H|A|F|D)\d+-?)+$", re.IGNORECASE)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="shapes side by side, with ratios",
        description="Two or more shapes (presets, Hugging Face configs or compact strings such as L12-H768-A12) "
        "side by side: parameters, FLOPs, memory, roofline latency, lint, and each shape's ratio to the first.",
    )
    one_line_errors(p)
    p.add_argument("shapes", nargs="+", metavar="SHAPE",
                   help="preset name, config path, or L<layers>-H<width>-A<heads>")
    p.add_argument("--like", metavar="PRESET", help="conventions (vocab, ffn, norm, ...) of compact shape strings")
    p.add_argument("--vocab", type=positive_int, help="vocabulary of compact shape strings")
    add_workload_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=run)


def read_shape(text: str, *, base):
    """(name, Shape, preset name or None) from a preset name, a config path or a compact string."""
    from depthwidth.shapes.presets import PRESETS, get_preset
    from depthwidth.shapes.shape_string import parse_shape_string

    if Path(text).exists():
        from depthwidth.hfconfig import from_hf_config

        return text, from_hf_config(text), None
    if _COMPACT.match(text):
        return text, parse_shape_string(text, base=base), None
    key = text.strip().lower().replace("_", "-")
    if key in PRESETS:
        return text, get_preset(key).shape, key
    try:
        get_preset(key)
    except ValueError as exc:
        raise UserError(f"cannot read {text!r} as a preset, a config path or a shape string like L12-H768-A12 "
                         f"({exc})") from None
    raise AssertionError("unreachable")


def run(args: argparse.Namespace) -> int:
    from depthwidth.machine import resolve_hardware
    from depthwidth.shapes.evaluate import Workload, compare
    from depthwidth.shapes.presets import get_preset
    from depthwidth.shapes.shape_string import DEFAULT_BASE

    if len(args.shapes) < 2:
        raise UserError(f"compare needs two or more shapes, got {len(args.shapes)}")
    base = get_preset(args.like).shape if args.like else DEFAULT_BASE
    if args.vocab:
        base = base.with_(vocab_size=args.vocab)
    read = [read_shape(t, base=base) for t in args.shapes]
    shapes = [(name, shape) for name, shape, _ in read]
    seq_len = args.seq_len or min(s.max_seq_len for _, s in shapes)
    too_short = [name for name, s in shapes if s.max_seq_len < seq_len]
    if too_short:
        raise UserError(f"--seq-len {seq_len} exceeds max_seq_len of {', '.join(too_short)}")
    workload = Workload(seq_len=seq_len, batch=args.batch, dtype=args.dtype, tp=args.tp, **pipeline_workload(args))
    result = compare(shapes, hardware=resolve_hardware(args.hardware, argument="--hardware"), workload=workload)
    data = result.to_dict()
    for record, (_, _, preset) in zip(data["shapes"], read):
        record["preset"] = _preset_info(preset) if preset else None
    if args.json:
        print_json(data)
        return 0
    from depthwidth.present.plan import compare_notes, compare_table
    from depthwidth.present.terminal import console as make_console

    console = make_console()
    console.print(compare_table(data))
    for line in compare_notes(data):
        console.print(line, style="dim", highlight=False)
    return 0

