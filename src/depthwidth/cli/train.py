"""`depthwidth train`: train one shape under the fair protocol and print what was measured.

    depthwidth train --shape L4-H128-A4 --corpus shakespeare --steps 500
    depthwidth train --data input.txt --tokenizer char --val-fraction 0.1 \\
        --layers 4 --heads 4 --width 128 --seq-len 64 --batch-size 12 --steps 2000 \\
        --lr 1e-3 --min-lr 1e-4 --warmup 100 --beta2 0.99 --dropout 0      # the classic char-level run
    depthwidth train --shape L4-H128-A4 --steps 2000 --out runs/a --checkpoint-every 200   # then --resume
    depthwidth train --init-from hf/a --steps 500 --out runs/b    # continue an exported (or any local) HF model

Unless --vocab is given, the vocabulary is the tokenizer's; unless --max-seq-len (or --preset/--hf)
gives one, the position table is --seq-len long. With --init-from and no shape flags, the shape
(vocabulary and context included) is the checkpoint's. Exit status: 0 completed, 1 diverged or failed,
2 bad input (one line on stderr, nothing left looking finished).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import typing

from depthwidth.cli import print_json
from depthwidth.cli.bench import has_shape_flags
from depthwidth.cli.common import add_shape_args, one_line_errors, shape_from_args
from depthwidth.errors import UserError
from depthwidth.present.progress import TrainProgressBar
from depthwidth.present.train import print_result
from depthwidth.artifact.config import TrainConfig
from depthwidth.data.probes import PROBES

HELP = "train a shape with the fair, resumable protocol and measure loss, speed, MFU and memory"
#: help sections of the derived flags, by the `group` of each TrainConfig field
GROUPS = {"data": "data", "budget": "budget (one of)", "optimizer": "optimizer and schedule",
          "parametrization": "parametrization (how init and learning rates scale with width and depth)",
          "execution": "execution", "measurement": "measurement and bookkeeping"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    add_shape_args(p)
    groups = {name: p.add_argument_group(title) for name, title in GROUPS.items()}
    source = groups["data"].add_mutually_exclusive_group()
    source.add_argument("--data", metavar="PATH", help="a UTF-8 text file or a folder of them (sets corpus)")
    source.add_argument("--probe", metavar="NAME",
                        help=f"a synthetic probe task: {', '.join(PROBES)}, or a full spec "
                             "probe:NAME[:TRAIN[:TEST]][@N]; accuracy is reported per difficulty")
    budget = groups["budget"].add_mutually_exclusive_group()
    add_config_flags(groups, into={"corpus": source, "steps": budget, "tokens": budget})
    r = p.add_argument_group("run folder")
    r.add_argument("--out", metavar="DIR", help="write run.json, checkpoint.pt and result.json here")
    r.add_argument("--resume", action="store_true", help="continue the run in --out (or return its result)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object (no progress bar)")
    p.set_defaults(run=run)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_config_flags(groups: dict, *, into: dict | None = None) -> None:
    """One flag per `TrainConfig` field, named after it (`batch_size` -> `--batch-size`), with its doc,
    default, choices and group read from the field: a new field gets its flag with no edit here. A flag
    not given leaves the dataclass default; values are checked by `TrainConfig` itself."""
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        meta = f.metadata
        kind = next(t for t in typing.get_args(hints[f.name]) or (hints[f.name],) if t is not type(None))
        default = "" if f.default is None or kind is bool else f" (default {f.default:g})" \
            if kind is float else f" (default {f.default})"
        kwargs: dict = {"dest": f.name, "default": argparse.SUPPRESS, "help": meta["doc"] + default}
        if kind is bool and meta.get("values"):  # --compile, --compile auto, --no-compile
            kwargs.update(action=_BoolOrValue, values=meta["values"])
        elif kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _parse_as(kind, f.name)
            kwargs["metavar"] = meta.get("metavar") or ({int: "N", float: "X"}.get(kind) if not meta.get("choices")
                                                     else None)
            if meta.get("choices"):
                kwargs["choices"] = meta["choices"]
        (into or {}).get(f.name, groups[meta["group"]]).add_argument(flag(f.name), **kwargs)


class _BoolOrValue(argparse.BooleanOptionalAction):
    """`--flag` (true), `--no-flag` (false) or `--flag VALUE` for one of the field's string `values`."""

    def __init__(self, option_strings, dest, *, values, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.nargs, self.allowed = "?", tuple(values)
        self.metavar = "{" + ",".join(self.allowed) + "}"

    def __call__(self, parser, namespace, values, option_string=None):
        if values is None:
            return super().__call__(parser, namespace, None, option_string)
        if option_string.startswith("--no-") or values not in self.allowed:
            raise argparse.ArgumentError(self, f"takes no value or one of {', '.join(self.allowed)}; got {values!r}")
        setattr(namespace, self.dest, values)


def _parse_as(kind: type, name: str):
    if typing.get_origin(kind) is tuple:  # tuple[float, ...]: comma-separated values
        item = _parse_as(typing.get_args(kind)[0], name)

        def parse_list(text: str):
            return tuple(item(part.strip()) for part in text.split(","))

        parse_list.__name__ = f"a comma-separated list of {item.__name__.removeprefix('a ').removeprefix('an ')}s"
        return parse_list
    what = {int: "an integer", float: "a number", str: "a string"}[kind]

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None

    parse.__name__ = what  # argparse names the type in its own messages
    return parse


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The `TrainConfig` of the given flags (every field a flag; --data and --probe set `corpus`).
    A rejected value is a UserError naming the flag."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    if "steps" not in values and "tokens" not in values:
        raise UserError("no budget: give --steps N or --tokens N")
    if getattr(args, "data", None):
        if not os.path.exists(args.data):
            raise FileNotFoundError(f"--data {args.data}: no such file or folder")
        values["corpus"] = os.path.abspath(args.data)
    if values.get("init_from"):
        values["init_from"] = os.path.abspath(values["init_from"])
    if getattr(args, "probe", None):
        values["corpus"] = args.probe if args.probe.startswith("probe:") else f"probe:{args.probe}"
    try:
        return TrainConfig(**values)
    except UserError as exc:
        name = re.match(r"(\w+)=", str(exc))
        if name and name.group(1) in values:
            raise UserError(f"{flag(name.group(1))}: {exc}") from None
        raise


def run(args: argparse.Namespace) -> int:
    if args.resume and not args.out:
        raise UserError("--resume needs --out DIR (the run folder to continue)")
    config = config_from_args(args)
    from_init = config.init_from is not None and not has_shape_flags(args)
    if from_init:  # the checkpoint's own shape, read by the HF config import
        from depthwidth.hfio.load import read_hf_checkpoint

        shape = read_hf_checkpoint(config.init_from).shape
    else:
        shape = shape_from_args(args)
    from depthwidth.data import load_dataset
    from depthwidth.train import train

    dataset = load_dataset(corpus=config.corpus, tokenizer=config.tokenizer, val_fraction=config.val_fraction,
                           test_fraction=config.test_fraction, cache_dir=config.cache_dir)
    changes = {}
    if args.vocab is None and not from_init:
        changes["vocab_size"] = dataset.vocab_size
    if args.max_seq_len is None and not args.preset and not args.hf and not from_init:
        changes["max_seq_len"] = config.seq_len
    shape = shape.with_(**changes) if changes else shape
    show = not args.json and sys.stderr.isatty()
    with TrainProgressBar(enabled=show, steps=config.total_steps) as progress:
        result = train(shape, config, out_dir=args.out, resume=args.resume, progress=progress, dataset=dataset)
    if args.json:
        print_json(result.to_dict())
    else:
        print_result(result, out=args.out)
    return 0 if result.status == "completed" else 1


