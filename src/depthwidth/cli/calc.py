"""`depthwidth calc`: parameters, FLOPs and memory of one shape, instantly and without torch.

    depthwidth calc --preset gpt2-small
    depthwidth calc --hf path/to/config.json --seq-len 4096 --batch 8 --json
    depthwidth calc --shape L24-H1024-A16 --ffn swiglu --norm rmsnorm --pos rope --vocab 32000
    depthwidth calc --list-presets
    depthwidth calc --layers 96 --width 12288 --heads 96 --vocab 51200 --max-seq-len 2048 --tp 8 --sp \
        --pp 8 --virtual-stages 3 --microbatches 64 --convention megatron --train-precision fp16-mixed ...

The numbers come from `depthwidth.shapes.summary.summarize`; this module parses and prints.
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import (
    add_pipeline_args, add_precision_args, add_shape_args, one_line_errors, positive_int, shape_from_args,
)
from depthwidth.shapes.activations import DEVICES, FLOAT_DTYPES
from depthwidth.shapes.flops import ATTENTION_KINDS, RECOMPUTE_KINDS
from depthwidth.shapes.memory import KV_DTYPES, OPTIMIZER_STATES, TRAIN_PRECISIONS, ZERO_STAGES
from depthwidth.shapes.ops import ATTN_KERNELS


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "calc",
        help="parameters, FLOPs and memory of one shape",
        description="Exact parameters, FLOPs per token and memory (model states, activations, KV cache) "
        "of one shape, from a preset, a Hugging Face config or flags. Pure Python, no torch.",
    )
    one_line_errors(p)
    p.add_argument("--list-presets", action="store_true", help="list the named shapes and exit")
    add_shape_args(p)
    w = p.add_argument_group("workload")
    w.add_argument("--seq-len", type=positive_int, metavar="T", help="tokens per sequence (default: max_seq_len)")
    w.add_argument("--batch", type=positive_int, default=1, metavar="B",
                   help="micro-batch per device, also the KV-cache batch (default 1)")
    w.add_argument("--attention", choices=ATTENTION_KINDS,
                   help="count half (causal) or all (full) of the score matrix (default: causal for a decoder)")
    w.add_argument("--recompute", choices=RECOMPUTE_KINDS, default="none", help="activation recomputation")
    w.add_argument("--train-precision", choices=TRAIN_PRECISIONS, default="bf16-mixed",
                   help="compute precision (default bf16-mixed)")
    w.add_argument("--param-dtype", choices=FLOAT_DTYPES, default="fp32",
                   help="master weights and optimizer states (default fp32)")
    w.add_argument("--optimizer", choices=tuple(OPTIMIZER_STATES), default="adamw", help="optimizer (default adamw)")
    w.add_argument("--zero", type=int, choices=ZERO_STAGES, default=0, help="ZeRO stage (default 0)")
    w.add_argument("--dp", type=positive_int, default=1, help="data-parallel degree (default 1)")
    w.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel degree (default 1)")
    w.add_argument("--sp", action="store_true", help="sequence parallelism with --tp (Korthikanti et al. 2022)")
    add_pipeline_args(w)
    add_precision_args(w)
    w.add_argument("--attn-impl", choices=ATTN_KERNELS, default="fused",
                   help="attention kernel for activation memory (default fused: flash/SDPA)")
    w.add_argument("--dropout", action="store_true", help="training with dropout (its masks are kept)")
    w.add_argument("--device", choices=DEVICES, default="cuda",
                   help="whose PyTorch kernels the activation bytes follow (default cuda)")
    w.add_argument("--kv-dtype", choices=KV_DTYPES, default="bf16", help="KV-cache element type (default bf16)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.set_defaults(run=run)


def calc_json(args: argparse.Namespace) -> dict:
    """What `calc --json` prints for parsed calc flags (the one reading of them: `run` and `depthwidth explore`)."""
    from depthwidth.shapes.summary import summarize


    shape = shape_from_args(args)
    summary = summarize(
        shape,
        seq_len=args.seq_len or shape.max_seq_len,
        micro_batch=args.batch,
        attention=args.attention or ("causal" if shape.causal else "full"),
        recompute=args.recompute,
        train_precision=args.train_precision,
        param_dtype=args.param_dtype,
        optimizer=args.optimizer,
        zero_stage=args.zero,
        dp=args.dp,
        tp=args.tp,
        sp=args.sp,
        pp=args.pp,
        virtual_stages=args.virtual_stages,
        microbatches=args.microbatches,
        convention=args.convention,
        residual_dtype=args.residual_dtype,
        grad_dtype=args.grad_dtype,
        attn_impl=args.attn_impl,
        dropout=args.dropout,
        device=args.device,
        kv_dtype=args.kv_dtype,
    )
    result = summary.to_dict()
    result["preset"] = _preset_info(args.preset) if args.preset else None
    return result


def run(args: argparse.Namespace) -> int:
    if args.list_presets:
        return _list_presets(as_json=args.json)
    result = calc_json(args)
    if args.json:
        print_json(result)
    else:
        from depthwidth.present.calc import summary_tables
        from depthwidth.present.terminal import console as make_console

        console = make_console()
        for table in summary_tables(result):
            console.print(table)
            console.print()
        if result["preset"] and result["preset"]["notes"]:
            console.print(f"[dim]{result['preset']['name']}: {result['preset']['notes']}[/dim]")
    return 0


def _preset_info(name: str) -> dict:
    from depthwidth.shapes.presets import get_preset

    preset = get_preset(name)
    return {"name": preset.name, "source": preset.source, "notes": preset.notes,
            "published_params": preset.published_params}


def _list_presets(*, as_json: bool) -> int:
    from depthwidth.shapes.params import count_params
    from depthwidth.shapes.presets import PRESETS

    rows = [{**p.to_dict(), "label": p.shape.label(), "params": count_params(p.shape).total} for p in PRESETS.values()]
    if as_json:
        print_json(rows)
        return 0
    from depthwidth.present.calc import presets_table
    from depthwidth.present.terminal import console

    console().print(presets_table(rows))
    return 0
