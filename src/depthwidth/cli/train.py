"""`depthwidth train`: train one shape under the fair protocol and print what was measured.

    depthwidth train --shape L4-H128-A4 --corpus shakespeare --steps 500
    depthwidth train --data input.txt --tokenizer char --val-fraction 0.1 \\
        --layers 4 --heads 4 --width 128 --seq-len 64 --batch-size 12 --steps 2000 \\
        --lr 1e-3 --min-lr 1e-4 --warmup 100 --beta2 0.99 --dropout 0      # the classic char-level run
    depthwidth train --shape L4-H128-A4 --steps 2000 --out runs/a --checkpoint-every 200   # then --resume

Unless --vocab is given, the vocabulary is the tokenizer's; unless --max-seq-len (or --preset/--hf)
gives one, the position table is --seq-len long. Exit status: 0 completed, 1 diverged or failed,
2 bad input (one line on stderr, nothing left looking finished).
"""

from __future__ import annotations

import argparse
import os
import sys

from depthwidth.cli import print_json
from depthwidth.errors import UserError
from depthwidth.cli.common import (
    add_shape_args,
    fraction,
    nonneg_float,
    nonneg_int,
    one_line_errors,
    positive_float,
    positive_int,
    shape_from_args,
)

HELP = "train a shape with the fair, resumable protocol and measure loss, speed, MFU and memory"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    add_shape_args(p)
    d = p.add_argument_group("data")
    src = d.add_mutually_exclusive_group()
    src.add_argument("--data", metavar="PATH", help="a UTF-8 text file or a folder of them")
    src.add_argument("--corpus", metavar="NAME",
                     help="shakespeare (default), python-docs, python-code, or a mixture like python-docs+python-code")
    src.add_argument("--probe", metavar="NAME",
                     help="a synthetic probe task: multihop, recall, facts, addition, parity, or a full spec "
                          "probe:NAME[:TRAIN[:TEST]][@N]; accuracy is reported per difficulty")
    d.add_argument("--tokenizer", default="byte", metavar="KIND", help="byte (default), char, or bpe:N")
    d.add_argument("--val-fraction", type=fraction, default=0.1, help="held-out tail of each slice (default 0.1)")
    d.add_argument("--test-fraction", type=fraction, default=0.0, help="test tail after validation (default 0)")
    d.add_argument("--seq-len", type=positive_int, default=128, metavar="T", help="context length (default 128)")
    d.add_argument("--batch-size", type=positive_int, default=32, metavar="B", help="sequences per step (default 32)")
    d.add_argument("--micro-batch", type=positive_int, metavar="M", help="sequences per forward (accumulation)")
    d.add_argument("--cache-dir", metavar="DIR", help="token cache (default $DEPTHWIDTH_CACHE or ~/.cache/depthwidth)")
    b = p.add_argument_group("budget and optimizer")
    budget = b.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=positive_int, metavar="N", help="optimizer steps")
    budget.add_argument("--tokens", type=positive_int, metavar="N", help="training tokens (rounded up to whole steps)")
    b.add_argument("--lr", type=positive_float, default=1e-3, help="peak learning rate (default 1e-3)")
    b.add_argument("--min-lr", type=nonneg_float, help="final learning rate (default lr/10)")
    b.add_argument("--warmup", type=nonneg_int, default=0, metavar="STEPS", help="linear warmup steps (default 0)")
    b.add_argument("--schedule", choices=("cosine", "linear", "constant"), default="cosine", help="decay (default cosine)")
    b.add_argument("--beta1", type=positive_float, default=0.9, help="AdamW beta1 (default 0.9)")
    b.add_argument("--beta2", type=positive_float, default=0.95, help="AdamW beta2 (default 0.95)")
    b.add_argument("--weight-decay", type=nonneg_float, default=0.1, help="on matrices (default 0.1)")
    b.add_argument("--decay-embeddings", action="store_true", help="also decay the embedding tables")
    b.add_argument("--grad-clip", type=nonneg_float, default=1.0, help="max gradient norm, 0 = off (default 1.0)")
    b.add_argument("--dropout", type=nonneg_float, default=0.0, help="dropout (default 0)")
    x = p.add_argument_group("execution and measurement")
    x.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="fp32 or bf16 autocast (default fp32); fp16 is refused on CPU")
    x.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="default: cuda if available")
    x.add_argument("--threads", type=positive_int, help="CPU threads (default: torch's current setting)")
    x.add_argument("--attn-impl", choices=("sdpa", "eager"), default="sdpa", help="attention kernel (default sdpa)")
    x.add_argument("--seed", type=nonneg_int, default=0, help="initialisation, dropout and batch order (default 0)")
    x.add_argument("--eval-every", type=nonneg_int, default=0, metavar="N", help="validation every N steps (0: end)")
    x.add_argument("--eval-windows", type=positive_int, default=64, metavar="N", help="windows per slice (default 64)")
    x.add_argument("--peak-flops", type=positive_float, metavar="F", help="MFU denominator, FLOP/s (default: measured)")
    r = p.add_argument_group("run folder")
    r.add_argument("--out", metavar="DIR", help="write run.json, checkpoint.pt and result.json here")
    r.add_argument("--checkpoint-every", type=nonneg_int, default=0, metavar="N",
                   help="checkpoint every N steps (default: only at the end)")
    r.add_argument("--resume", action="store_true", help="continue the run in --out (or return its result)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object (no progress bar)")
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    from depthwidth.train import TrainConfig

    if args.steps is None and args.tokens is None:
        raise UserError("no budget: give --steps N or --tokens N")
    corpus = os.path.abspath(args.data) if args.data else (args.corpus or "shakespeare")
    if args.probe:
        corpus = args.probe if args.probe.startswith("probe:") else f"probe:{args.probe}"
    if args.data and not os.path.exists(args.data):
        raise FileNotFoundError(f"--data {args.data}: no such file or folder")
    return TrainConfig(
        corpus=corpus, tokenizer=args.tokenizer, val_fraction=args.val_fraction, test_fraction=args.test_fraction,
        seq_len=args.seq_len, batch_size=args.batch_size, micro_batch=args.micro_batch, cache_dir=args.cache_dir,
        steps=args.steps, tokens=args.tokens, lr=args.lr, min_lr=args.min_lr, warmup=args.warmup,
        schedule=args.schedule, beta1=args.beta1, beta2=args.beta2, weight_decay=args.weight_decay,
        decay_embeddings=args.decay_embeddings, grad_clip=args.grad_clip, dtype=args.dtype, device=args.device,
        threads=args.threads, attn_impl=args.attn_impl, dropout=args.dropout, seed=args.seed,
        eval_every=args.eval_every, eval_windows=args.eval_windows, checkpoint_every=args.checkpoint_every,
        peak_flops=args.peak_flops,
    )


def run(args: argparse.Namespace) -> int:
    if args.resume and not args.out:
        raise UserError("--resume needs --out DIR (the run folder to continue)")
    config = config_from_args(args)
    shape = shape_from_args(args)
    from depthwidth.data import load_dataset
    from depthwidth.train import train

    dataset = load_dataset(corpus=config.corpus, tokenizer=config.tokenizer, val_fraction=config.val_fraction,
                           test_fraction=config.test_fraction, cache_dir=config.cache_dir)
    changes = {}
    if args.vocab is None:
        changes["vocab_size"] = dataset.vocab_size
    if args.max_seq_len is None and not args.preset and not args.hf:
        changes["max_seq_len"] = config.seq_len
    shape = shape.with_(**changes) if changes else shape
    show = not args.json and sys.stderr.isatty()
    with _progress_display(enabled=show, steps=config.total_steps) as progress:
        result = train(shape, config, out_dir=args.out, resume=args.resume, progress=progress, dataset=dataset)
    if args.json:
        print_json(result.to_dict())
    else:
        _print_result(result, out=args.out)
    return 0 if result.status == "completed" else 1


class _progress_display:
    """A rich progress bar on stderr (step, loss, tokens/s, ETA), or nothing."""

    def __init__(self, *, enabled: bool, steps: int) -> None:
        self.enabled, self.steps = enabled, steps

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[tps]} tok/s"),
                             TextColumn("ETA {task.fields[eta]}"), console=Console(stderr=True))
        self._task = self._bar.add_task("train", total=self.steps, loss="-", tps="-", eta="-")
        self._bar.__enter__()
        return self._update

    def _update(self, p) -> None:
        if p.phase == "train":
            self._bar.update(self._task, completed=p.step, loss=f"{p.loss:.4f}", tps=f"{p.tokens_per_s:,.0f}",
                             eta=_duration(p.eta_s))
        elif p.phase == "eval":
            self._bar.console.print(f"step {p.step}: val loss {p.val_loss:.4f}")

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._bar.__exit__(*exc)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _fmt(value, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def result_rows(result) -> list[tuple[str, str]]:
    """(label, text) rows of the headline numbers."""
    rows = [("status", result.status + (f" at step {result.diverged_at_step}" if result.diverged_at_step is not None
                                         else "") + (f" ({result.error})" if result.error else ""))]
    rows.append(("val loss (nats/token)", _fmt(result.val_loss)))
    if len(result.val_loss_by_slice) > 1:
        rows += [(f"  slice {k}", _fmt(v)) for k, v in result.val_loss_by_slice.items()]
    rows.append(("val loss by position", " ".join(_fmt(v, ".3f") for v in result.val_loss_by_position)))
    for probe, by_difficulty in result.probe_accuracy.items():
        rows.append((f"  probe {probe} accuracy", "  ".join(f"{d}: {a:.1%}" for d, a in by_difficulty.items())))
    rows += [
        ("params (non-embedding)", f"{result.params:,} ({result.non_embedding_params:,})"),
        ("steps / tokens", f"{result.steps:,} / {result.tokens:,}"),
        ("tokens/s (training)", _fmt(result.tokens_per_s, ",.0f")),
        ("achieved FLOP/s", _fmt(result.achieved_flops_per_s and result.achieved_flops_per_s / 1e9, ",.2f") + " G"),
        ("MFU", _fmt(result.mfu and 100 * result.mfu, ".2f") + f" % of {_fmt(result.peak_flops / 1e9, ',.0f')} G "
         f"({result.peak_flops_source})"),
        ("peak memory", _fmt(result.peak_memory_bytes and result.peak_memory_bytes / 2**20, ",.1f") + " MiB"
         + (f" (activations {result.saved_activation_bytes / 2**20:,.1f} MiB, peak RSS "
            f"{result.peak_rss_bytes / 2**20:,.0f} MiB)" if result.saved_activation_bytes is not None else "")),
        ("time train / eval (s)", f"{result.train_seconds:,.1f} / {result.eval_seconds:,.1f}"),
        ("device / dtype / threads", f"{result.device} / {result.dtype} / {result.threads}"),
        ("tokenizer (vocab)", f"{result.tokenizer} ({result.vocab_size})"),
        ("corpus hash", result.corpus_hash[:16]),
        ("batch stream hash", result.batch_stream_hash[:16]),
    ]
    return rows


def _print_result(result, *, out: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"depthwidth train: {result.shape.get('n_layers')} layers x {result.shape.get('d_model')}",
                  show_header=False)
    table.add_column("quantity", style="bold")
    table.add_column("value")
    for label, text in result_rows(result):
        table.add_row(label, text)
    if out:
        table.add_row("run folder", out)
    Console(file=sys.stdout, width=None if sys.stdout.isatty() else 120).print(table)
