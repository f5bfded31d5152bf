"""Freed host memory kept in the process (`machine/host_memory.py`) against the C library's default, on the
training step of a plain loop: wall ms per step and minor page faults per step, interleaved.

The setting is process-wide and cannot be undone, so each measurement is its own spawned process: pairs of
processes (default, kept) alternate for `--pairs` pairs (the order flips every pair), each training `--steps`
steps of bench_train.py's plain loop (our `Transformer`, torch's fused AdamW, no clipping; the first
`--warmup` left out). Printed per shape: the
median ms per step of each side, the median and range of the per-pair ratio default/kept (a VM's speed drifts
by 10-20% over minutes, so only pairs taken back to back are compared), and page faults per step (these do
not drift: they count what the allocator does).

    python benchmarks/bench_host_memory.py [--shapes 16x64,1x256,4x128,8x256] [--pairs 4] [--steps 12]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys


def child(kept: bool, dims, steps: int, warmup: int, threads: int, conn) -> None:
    import argparse
    import resource

    if kept:
        from depthwidth.machine.host_memory import keep_freed_memory

        keep_freed_memory()
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_train import groups_of, plain_loop, row_setup

    from depthwidth.data import load_dataset
    from depthwidth.model import Transformer

    torch.set_num_threads(threads)
    dataset, device = load_dataset(corpus="shakespeare", tokenizer="byte"), torch.device("cpu")
    args = argparse.Namespace(seq_len=128, batch=32, steps=steps, threads=threads, corpus="shakespeare")
    shape, config, stream = row_setup(dims, "fp32", args, dataset, device)
    torch.manual_seed(config.seed)
    model = Transformer(shape).train()
    groups = groups_of(list(model.named_parameters()), config, ("embed.weight", "pos_embed.weight"))
    faults = []
    seconds, _ = plain_loop(model, groups, config, stream, device, warmup=warmup, hf=False, adamw="fused",
                            on_warm=lambda: faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt))
    n = steps - warmup
    conn.send((seconds / n, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults[0]) / n))


def measure(kept: bool, dims, args):
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=child, args=(kept, dims, args.steps, args.warmup, args.threads, theirs))
    proc.start()
    theirs.close()
    try:
        return mine.recv()
    finally:
        proc.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="16x64,1x256,4x128,8x256")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    print(f"training step, plain loop, fused AdamW, seq 128, batch 32, {args.threads} threads, {args.steps} steps "
          f"({args.warmup} warm-up) per process, {args.pairs} pairs; load average {os.getloadavg()[0]:.2f}")
    print(f"{'L-H':>8} {'default ms':>10} {'kept ms':>8} {'default/kept':>20} {'faults default':>14} {'kept':>6}")
    for text in args.shapes.split(","):
        dims = tuple(int(v) for v in text.split("x"))
        got = {False: [], True: []}
        ratios = []
        for p in range(args.pairs):
            order = (False, True) if p % 2 == 0 else (True, False)
            pair = {kept: measure(kept, dims, args) for kept in order}
            for kept in order:
                got[kept].append(pair[kept])
            ratios.append(pair[False][0] / pair[True][0])
        ms = {k: 1e3 * statistics.median(s for s, _ in v) for k, v in got.items()}
        faults = {k: statistics.median(f for _, f in v) for k, v in got.items()}
        print(f"{f'L{dims[0]}-H{dims[1]}':>8} {ms[False]:>10.1f} {ms[True]:>8.1f} "
              f"{f'{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})':>20} "
              f"{faults[False]:>14,.0f} {faults[True]:>6,.0f}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
