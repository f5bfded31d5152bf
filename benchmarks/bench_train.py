"""Trainer overhead: `depthwidth.train.train` against a plain, minimal PyTorch loop, side by side.

Both train the same Transformer (same seed, so the same initial weights), on the same batches
(`BatchStream`), with the same AdamW parameter groups, gradient clipping, threads and dtype. They
alternate in rounds (ours, plain, then plain, ours, ...) so that other load on the machine hits
both alike. Each side's step time covers everything done per step (fetching the batch, setting the
learning rate, recording the loss), first step excluded; tokens/s is batch tokens over the median
step time pooled over the rounds (the median, because other processes on a shared machine add
spikes that have nothing to do with either loop). The CPU-time ratio (process CPU seconds per step,
summed) is printed too: on a machine shared with other work it is the steadier measure of the
trainer's own overhead, which is CPU work on the calling thread (with one thread all compute runs
there too). The target is judged on the CPU-time ratio with one thread, on the wall-clock ratio
with more (where CPU time also counts threads spinning at barriers).
Three shapes of about 0.59M non-embedding parameters (deep-narrow, middle, shallow-wide) are run
in fp32 and in bf16 autocast. The plain loop's losses are checked against the trainer's curve
(they match bit for bit when both do the same arithmetic).

Target: ours >= 0.95 x plain for every row. Exit status 1 when missed.

    python benchmarks/bench_train.py [--steps 20] [--rounds 3] [--threads 2] [--seq-len 128] [--batch 16]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import torch

from depthwidth.data import BatchStream, load_dataset
from depthwidth.model import Transformer
from depthwidth.shapes import Shape, count_params
from depthwidth.shapes.flops import flops
from depthwidth.machine import peak_flops
from depthwidth.train import TrainConfig, lr_at, param_groups, train

TARGET = 0.95
SHAPES = {  # ~12 L d^2 = 0.59-0.60M non-embedding parameters each
    "deep-narrow": dict(n_layers=12, d_model=64, n_heads=2),
    "middle": dict(n_layers=3, d_model=128, n_heads=4),
    "shallow-wide": dict(n_layers=1, d_model=224, n_heads=7),
}


def plain_loop(shape: Shape, config: TrainConfig, stream: BatchStream) -> tuple[list[float], list[float], list[float]]:
    """A minimal training loop; returns (wall seconds and CPU seconds of each step after the first, losses)."""
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    model = Transformer(shape)
    model.train()
    groups = [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in param_groups(model, config)]
    opt = torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps, foreach=True)
    params = [p for g in groups for p in g["params"]]
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if config.dtype == "bf16" else contextlib.nullcontext()
    losses, seconds, cpu = [], [], []
    for step in range(config.total_steps):
        t0, c0 = time.perf_counter(), time.process_time()
        for g in opt.param_groups:
            g["lr"] = lr_at(config, step)
        x, y = stream.batch(step)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        with amp:
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step > 0:
            seconds.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    return seconds, cpu, losses


def cpu_time_gemm_peak(dtype: str, *, n: int = 1024, reps: int = 10) -> float:
    """Best single-thread GEMM FLOP/s (torch.mm or oneDNN) timed by this thread's CPU time, which
    other processes on the machine do not stretch: the denominator of the CPU-time MFU column."""
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    dt = torch.float32 if dtype == "fp32" else torch.bfloat16
    a, b = (torch.randn(n, n, generator=gen).to(dt) for _ in range(2))
    am, bm = a.to_mkldnn(), b.to_mkldnn()
    best = float("inf")
    for fn in (lambda: torch.mm(a, b), lambda: torch._C._nn.mkldnn_linear(am, bm, None)):
        fn()
        for _ in range(reps):
            c0 = time.thread_time()
            fn()
            best = min(best, time.thread_time() - c0)
    return 2.0 * n**3 / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per run (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--corpus", default="shakespeare")
    args = parser.parse_args()

    dataset = load_dataset(corpus=args.corpus, tokenizer="byte")
    rows, ok = [], True
    print(f"trainer vs plain loop: {args.corpus}, byte tokens, seq {args.seq_len}, batch {args.batch}, "
          f"{args.steps} steps x {args.rounds} rounds, {args.threads} threads, torch {torch.__version__}")
    header = (f"{'shape':<13} {'L-H':>7} {'non-emb':>8} {'dtype':>5} {'ours tok/s':>11} {'plain tok/s':>12} "
              f"{'ratio':>6} {'cpu ratio':>9} {'MFU ours':>9} {'peak G':>6} {'MFU cpu':>8} {'peak G':>6} {'same loss':>9}")
    print(header)
    for dtype in ("fp32", "bf16"):
        peak = peak_flops(dtype=dtype, device="cpu", threads=args.threads)
        cpu_peak = cpu_time_gemm_peak(dtype) * args.threads
        for name, sizes in SHAPES.items():
            shape = Shape(**sizes, vocab_size=dataset.vocab_size, max_seq_len=args.seq_len)
            config = TrainConfig(corpus=args.corpus, seq_len=args.seq_len, batch_size=args.batch, steps=args.steps,
                                 threads=args.threads, dtype=dtype, eval_windows=4)
            stream = BatchStream(dataset, seq_len=args.seq_len, batch_size=args.batch, seed=config.seed)
            ours, plain, ours_cpu, plain_cpu, same = [], [], [], [], True
            for r in range(args.rounds):
                order = ("ours", "plain") if r % 2 == 0 else ("plain", "ours")
                for who in order:
                    if who == "ours":
                        result = train(shape, config, dataset=dataset)
                        ours += [c["seconds"] for c in result.curve[1:]]
                        ours_cpu += [c["cpu_seconds"] for c in result.curve[1:]]
                        our_losses = [c["loss"] for c in result.curve]
                    else:
                        seconds, cpu, plain_losses = plain_loop(shape, config, stream)
                        plain += seconds
                        plain_cpu += cpu
                same = same and our_losses == plain_losses
            tokens = config.tokens_per_step
            o_mean, p_mean = tokens / statistics.median(ours), tokens / statistics.median(plain)
            ratio = o_mean / p_mean
            cpu_ratio = sum(plain_cpu) / sum(ours_cpu)
            per_token = flops(shape, seq_len=args.seq_len).train_per_token
            mfu = per_token * o_mean / peak.flops_per_s
            mfu_cpu = per_token * tokens * len(ours_cpu) / sum(ours_cpu) / cpu_peak
            ok = ok and (cpu_ratio if args.threads == 1 else ratio) >= TARGET
            label = f"L{shape.n_layers}-H{shape.d_model}"
            print(f"{name:<13} {label:>7} {count_params(shape).non_embedding:>8,} {dtype:>5} {o_mean:>11,.0f} "
                  f"{p_mean:>12,.0f} {ratio:>6.3f} {cpu_ratio:>9.3f} {100 * mfu:>8.1f}% "
                  f"{peak.flops_per_s / 1e9:>6,.0f} {100 * mfu_cpu:>7.1f}% {cpu_peak / 1e9:>6,.0f} "
                  f"{'yes' if same else 'NO':>9}", flush=True)
            rows.append(ratio)
    print("MFU ours: the trainer's own figure (wall tokens/s x model FLOPs/token over its peak, the best "
          "square GEMM by wall clock);\nMFU cpu: per CPU-second of the trainer's steps over a single-thread "
          "CPU-time GEMM peak x threads (steady on a busy machine)")
    print(f"target ours/plain >= {TARGET} ({'CPU-time' if args.threads == 1 else 'wall-clock'} ratio): "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
