"""`depthwidth bench`: serving latency, throughput, KV cache and int8 quantization of a shape (random
weights, speed only), a trained checkpoint or a local Hugging Face model folder (its weights in our
model), each latency next to its roofline prediction."""

from __future__ import annotations

import argparse

from depthwidth.bench.config import BENCH_DTYPES, CPU_BENCH_DTYPES, QUANTIZE
from depthwidth.cli import print_json
from depthwidth.errors import UserError
from depthwidth.cli.common import add_shape_args, int_list, one_line_errors, positive_int, shape_from_args
from depthwidth.model.kernels import ATTN_IMPLS

HELP = "measure batch-1 prefill/decode latency, throughput, KV cache and int8 quantization"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help=HELP, description=HELP + ".")
    one_line_errors(p)
    add_shape_args(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--checkpoint", metavar="PATH", help="a checkpoint.pt (or run folder) written by depthwidth train")
    source.add_argument("--hf-model", metavar="HF_DIR",
                        help="a local Hugging Face model folder (config.json + safetensors) of a supported class, "
                             "timed through our model of its shape")
    g = p.add_argument_group("measurement")
    g.add_argument("--prompt-lens", type=int_list, metavar="N,N",
                   help="prefill prompt lengths (default: 16,64,256 where they fit)")
    g.add_argument("--contexts", type=int_list, metavar="N,N",
                   help="decode context lengths (default: 16,64,256 where they fit)")
    g.add_argument("--batches", type=int_list, metavar="B,B", help="throughput batch sizes (default 1,4,16,64)")
    g.add_argument("--no-throughput", action="store_true", help="skip the throughput measurement")
    g.add_argument("--new-tokens", type=positive_int, metavar="N", help="tokens generated per sequence (default 16)")
    g.add_argument("--dtype", choices=BENCH_DTYPES, default="fp32",
                   help=f"weights and activations (default fp32; on a CPU one of {', '.join(CPU_BENCH_DTYPES)})")
    g.add_argument("--device", default="cpu", metavar="DEV",
                   help="cpu (default), cuda, cuda:N or auto: where the model runs and the profile is measured")
    g.add_argument("--no-cuda-graphs", action="store_true",
                   help="on CUDA, do not also time decode replayed as a CUDA graph")
    g.add_argument("--allow-slow-dtype", action="store_true",
                   help="measure in a --dtype this machine only emulates (refused otherwise: it can be 100x slower)")
    g.add_argument("--quantize", choices=tuple(q for q in QUANTIZE if q),
                   help="also measure int8 dynamic quantization of the Linear layers")
    g.add_argument("--group-size", type=positive_int, default=128, help="group size the lint checks (default 128)")
    g.add_argument("--repeat", type=positive_int, default=5, help="timed repetitions per point (default 5)")
    g.add_argument("--warmup", type=int, default=2, help="untimed warm-up runs per point (default 2)")
    g.add_argument("--threads", type=positive_int,
                   help="torch threads (default: torch's current setting); on a busy machine 1 is much steadier")
    g.add_argument("--attn-impl", choices=ATTN_IMPLS, default="sdpa", help="attention implementation")
    g.add_argument("--seed", type=int, default=0, help="random weights and prompts")
    g.add_argument("--hardware", default="measured", metavar="NAME",
                   help="what the predictions are for: 'measured' (default: this machine's profile, measured "
                        "and saved when absent), a row of `depthwidth hw list`, or a profile JSON path")
    p.add_argument("--json", action="store_true", help="print one JSON object (no progress bar)")
    p.set_defaults(run=run)


def has_shape_flags(args: argparse.Namespace) -> bool:
    """Whether any shape flag (a base or a change) was given."""
    names = ("preset", "hf", "shape", "layers", "width", "heads", "kv_heads", "head_dim", "d_ff", "ffn", "norm",
             "bias", "pos", "max_seq_len", "vocab", "rope_theta", "kind", "tied", "parallel_residual",
             "post_norm", "final_norm", "lm_head")
    return any(getattr(args, n, None) is not None for n in names)


def _config(args: argparse.Namespace):
    from depthwidth.bench.serving import BenchConfig

    if args.warmup < 0:
        raise UserError(f"--warmup {args.warmup} must be >= 0")
    if args.dtype not in CPU_BENCH_DTYPES and not args.device.startswith("cuda"):
        raise UserError(f"--dtype {args.dtype} runs on CUDA only (about 1 GFLOP/s on a CPU), not --device "
                        f"{args.device}; use {' or '.join(CPU_BENCH_DTYPES)}")
    kw = {"dtype": args.dtype, "quantize": args.quantize, "repeat": args.repeat, "warmup": args.warmup,
          "threads": args.threads, "attn_impl": args.attn_impl, "seed": args.seed, "group_size": args.group_size,
          "allow_slow_dtype": args.allow_slow_dtype, "device": args.device,
          "cuda_graphs": not args.no_cuda_graphs}
    for name in ("prompt_lens", "contexts", "batches", "new_tokens"):
        if getattr(args, name) is not None:
            kw[name] = getattr(args, name)
    if args.no_throughput:
        kw["batches"] = ()
    return BenchConfig(**kw)


def run(args: argparse.Namespace) -> int:
    given = args.checkpoint or args.hf_model
    if given and has_shape_flags(args):
        raise UserError(f"{'--checkpoint' if args.checkpoint else '--hf-model'} already gives the shape; "
                        "drop the shape flags")
    if args.hf_model:
        from depthwidth.hfio.weights import model_folder

        model_folder(args.hf_model)  # a folder without config.json: one line before any timing
    target = given if given else shape_from_args(args)
    from depthwidth.bench.serving import bench
    from depthwidth.machine import hardware_choice

    config = _config(args)
    hardware = hardware_choice(args.hardware, argument="--hardware")  # a wrong name fails before any timing
    if args.json:
        result = bench(target, config, hardware=hardware)
        print_json(result.to_dict())
        return 0
    from depthwidth.present.bench import bench_tables, summary_line
    from depthwidth.present.progress import TaskProgress
    from depthwidth.present.terminal import console

    with TaskProgress("bench") as progress:
        result = bench(target, config, progress=progress, hardware=hardware)
    out = console()
    data = result.to_dict()
    out.print(summary_line(data))
    for table in bench_tables(data):
        out.print(table)
    return 0
