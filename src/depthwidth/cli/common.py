"""Flags shared by the commands that take a model shape (calc, plan, train, bench).

A shape comes from one base and optional changes:
  base     --preset NAME | --hf PATH (config.json or model folder) | none (flags alone)
  sizes    --shape L12-H768-A12[-KV4][-F3072][-D64]  or  --layers/--width/--heads/--kv-heads/--head-dim/--d-ff
  rest     --ffn --norm --bias --pos --max-seq-len --vocab --tied/--untied --parallel-residual --post-norm ...
With a base, size and convention flags change it (`Shape.with_`, derived sizes recomputed); without
one, --shape or all of --layers, --width and --heads are needed (vocabulary 50257 unless --vocab).
No torch import here: `depthwidth calc --json` must stay light.
"""

from __future__ import annotations

import argparse
import math

from depthwidth.errors import UserError
from depthwidth.hfconfig import from_hf_config
from depthwidth.shapes.activations import FLOAT_DTYPES
from depthwidth.shapes.memory import CONVENTIONS
from depthwidth.shapes.presets import get_preset
from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, KINDS, NORM_KINDS, POS_KINDS, Shape
from depthwidth.shapes.shape_string import DEFAULT_BASE, parse_shape_string

#: flag dest -> Shape field, for the size flags.
SIZE_FLAGS = {
    "layers": "n_layers",
    "width": "d_model",
    "heads": "n_heads",
    "kv_heads": "n_kv_heads",
    "head_dim": "head_dim",
    "d_ff": "d_ff",
}
#: flag dest -> Shape field, for the convention flags.
CONVENTION_FLAGS = {
    "ffn": "ffn",
    "norm": "norm",
    "bias": "bias",
    "pos": "pos",
    "max_seq_len": "max_seq_len",
    "vocab": "vocab_size",
    "tied": "tie_embeddings",
    "parallel_residual": "parallel_residual",
    "post_norm": "norm_position",
    "rope_theta": "rope_theta",
    "kind": "kind",
    "final_norm": "final_norm",
    "lm_head": "lm_head",
}
DEFAULT_VOCAB = 50257


def _parse(text: str, cast, what: str):
    """`cast(text)`, refusing text that is not one, and a float that is not finite (inf, nan, or an
    overflow such as 1e400, which Python reads as inf)."""
    try:
        value = cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (the message names the value; argparse adds the flag)."""
    value = _parse(text, int, "an integer")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive integer")
    return value


def nonneg_int(text: str) -> int:
    value = _parse(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


def positive_float(text: str) -> float:
    value = _parse(text, float, "a number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def nonneg_float(text: str) -> float:
    value = _parse(text, float, "a number")
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


def fraction(text: str) -> float:
    """argparse type: a number in [0, 1); '5%' means 0.05."""
    value = _parse(text.rstrip("%"), float, "a fraction like 0.05 or 5%") / (100 if text.endswith("%") else 1)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be in [0, 1) (or 0% to 100%)")
    return value


def int_list(text: str) -> tuple[int, ...]:
    """argparse type: '16,64,256' -> (16, 64, 256), every entry a positive integer."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of positive integers")
    return tuple(positive_int(t) for t in items)


def printable(text: str) -> str:
    """`text` as one printable line: a line break or any other control or format character (which may
    come from a file name or a value the user typed) is written as its escape, \\n or \\x1e."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make `parser` report usage errors as one line on stderr with exit status 2 (no usage dump)."""

    def error(message: str):
        parser.exit(2, f"{parser.prog}: error: {printable(message)} (see {parser.prog} --help)\n")

    parser.error = error  # type: ignore[method-assign]
    return parser


def add_shape_args(parser: argparse.ArgumentParser) -> None:
    """Add the shape flags (see the module docstring) to `parser`."""
    g = parser.add_argument_group("shape", "a preset, an HF config or flags; flags change a preset/config")
    g.add_argument("--preset", metavar="NAME", help="a named shape (see --list-presets), e.g. gpt2-small")
    g.add_argument("--hf", metavar="PATH", help="a Hugging Face config.json (or a folder holding one)")
    g.add_argument("--shape", metavar="SPEC", help="compact sizes, e.g. L12-H768-A12 or L32-H4096-A32-KV8-F14336")
    g.add_argument("--layers", type=positive_int, metavar="L", help="number of blocks")
    g.add_argument("--width", type=positive_int, metavar="H", help="d_model")
    g.add_argument("--heads", type=positive_int, metavar="A", help="query heads")
    g.add_argument("--kv-heads", type=positive_int, metavar="K", help="key/value heads (GQA; default: --heads)")
    g.add_argument("--head-dim", type=positive_int, metavar="D", help="per-head size (default: width/heads)")
    g.add_argument("--d-ff", type=positive_int, metavar="F", help="MLP hidden size (default 4H, or 8H/3 for swiglu)")
    g.add_argument("--ffn", choices=FFN_KINDS, help="MLP kind")
    g.add_argument("--norm", choices=NORM_KINDS, help="norm kind")
    g.add_argument("--bias", choices=BIAS_KINDS, help="which layers have biases")
    g.add_argument("--pos", choices=POS_KINDS, help="position encoding")
    g.add_argument("--max-seq-len", type=positive_int, metavar="T", help="context length (learned table size)")
    g.add_argument("--vocab", type=positive_int, metavar="V", help=f"vocabulary size (default {DEFAULT_VOCAB})")
    g.add_argument("--rope-theta", type=positive_float, metavar="THETA", help="RoPE base")
    g.add_argument("--kind", choices=KINDS, help="decoder (causal) or encoder (bidirectional)")
    tie = g.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_const", const=True, help="LM head shares the embedding")
    tie.add_argument("--untied", dest="tied", action="store_const", const=False, help="separate LM head")
    g.add_argument("--parallel-residual", action=argparse.BooleanOptionalAction, default=None,
                   help="GPT-NeoX parallel attention and MLP")
    g.add_argument("--post-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="norm after the residual add (original Transformer)")
    g.add_argument("--final-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="norm after the last block")
    g.add_argument("--lm-head", action=argparse.BooleanOptionalAction, default=None, help="output projection to vocab")


def add_pipeline_args(group) -> None:
    """--pp, --virtual-stages, --microbatches (pipeline parallelism, `depthwidth.shapes.pipeline`) on an
    argument group; calc, plan and compare share them."""
    group.add_argument("--pp", type=positive_int, default=1, help="pipeline-parallel stages (default 1)")
    group.add_argument("--virtual-stages", type=positive_int, default=1, metavar="V",
                       help="model chunks per pipeline stage; > 1 is Megatron-LM's interleaved 1F1B (default 1)")
    group.add_argument("--microbatches", type=positive_int, metavar="M",
                       help="micro-batches per optimizer step, for the bubble and the in-flight activations "
                            "(default: --pp)")


def add_precision_args(group) -> None:
    """--convention, --residual-dtype, --grad-dtype: how mixed precision is accounted (`depthwidth.shapes.memory`)."""
    group.add_argument("--convention", choices=CONVENTIONS, default="amp",
                       help="amp: PyTorch autocast, fp32 residual stream; megatron: Megatron-LM, half-precision "
                            "residual stream and fp32 main gradients (default amp)")
    group.add_argument("--residual-dtype", choices=FLOAT_DTYPES,
                       help="dtype of the residual stream and norm inputs (default: from --convention)")
    group.add_argument("--grad-dtype", choices=FLOAT_DTYPES,
                       help="dtype of the gradients (default: the compute dtype, fp32 with --convention megatron)")


def _conventions(args: argparse.Namespace) -> dict:
    out = {}
    for dest, field in CONVENTION_FLAGS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        if dest == "post_norm":
            value = "post" if value else "pre"
        out[field] = value
    return out


def _sizes(args: argparse.Namespace) -> dict:
    return {field: getattr(args, dest) for dest, field in SIZE_FLAGS.items() if getattr(args, dest, None) is not None}


def _base(args: argparse.Namespace) -> Shape | None:
    preset, hf = getattr(args, "preset", None), getattr(args, "hf", None)
    if preset and hf:
        raise UserError("--preset and --hf both give a shape; use one of them")
    if preset:
        return get_preset(preset).shape
    if hf:
        return from_hf_config(hf)
    return None


def shape_from_args(args: argparse.Namespace) -> Shape:
    """The Shape the shape flags describe. Raises UserError/ValueError with a one-line reason."""
    base = _base(args)
    sizes, conventions = _sizes(args), _conventions(args)
    text = getattr(args, "shape", None)
    if text and sizes:
        flags = ", ".join("--" + d.replace("_", "-") for d, f in SIZE_FLAGS.items() if f in sizes)
        raise UserError(f"--shape and {flags} both give sizes; use one or the other")
    if text:
        start = base or DEFAULT_BASE
        return parse_shape_string(text, base=start.with_(**conventions) if conventions else start)
    if base is not None:
        changes = {**conventions, **sizes}
        return base.with_(**changes) if changes else base
    missing = [f"--{d}" for d in ("layers", "width", "heads") if SIZE_FLAGS[d] not in sizes]
    if missing:
        raise UserError(
            "no shape given: use --preset NAME, --hf PATH, --shape L12-H768-A12, "
            f"or --layers, --width and --heads (missing {', '.join(missing)})"
        )
    fields = {"vocab_size": DEFAULT_VOCAB, **conventions, **sizes}
    return Shape(**fields)

