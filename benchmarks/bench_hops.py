"""What the hop-k induction probe costs per training step: drawing a step's batch (`BatchStream.batch`) on
a mixture with `hops` against the same corpus without it, and against one training step of the smallest
and the largest shape of `examples/probes.toml` (forward, backward, AdamW).

Fresh rows are generated on the host every step (letters, then the k-hop targets with a loop over the
positions), so their cost must stay a small share of a step. Target: drawing a batch under 5% of the
shallowest shape's training step. Exit status 1 when it is not.

    python benchmarks/bench_hops.py [--batch 16] [--seq-len 64] [--steps 200] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from depthwidth.data import BatchStream, load_dataset
from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig
from depthwidth.artifact.model import build_model

MIXTURE = "python-docs+probe:hops:1,2,3,4@2500"


def batch_ms(stream: BatchStream, steps: int) -> float:
    t0 = time.perf_counter()
    for step in range(steps):
        stream.batch(step)
    return (time.perf_counter() - t0) / steps * 1e3


def step_ms(shape: Shape, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    model = build_model(shape, TrainConfig(corpus=MIXTURE, steps=1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i in range(steps + 3):
        if i == 3:  # after the warm-up steps
            t0 = time.perf_counter()
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (time.perf_counter() - t0) / steps * 1e3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    kw = dict(seq_len=args.seq_len, batch_size=args.batch, seed=0)
    mixed = BatchStream(load_dataset(corpus=MIXTURE, val_fraction=0.05), **kw)
    text = BatchStream(load_dataset(corpus="python-docs", val_fraction=0.05), **kw)
    with_hops, without = batch_ms(mixed, args.steps), batch_ms(text, args.steps)
    x, y = (torch.from_numpy(a) for a in mixed.batch(0))
    shapes = {"L1-H96-A6": Shape(n_layers=1, d_model=96, n_heads=6, vocab_size=256, max_seq_len=args.seq_len,
                                 pos="rope", bias="none"),
              "L8-H32-A2": Shape(n_layers=8, d_model=32, n_heads=2, vocab_size=256, max_seq_len=args.seq_len,
                                 pos="rope", bias="none")}
    steps = {label: step_ms(shape, x, y, max(10, args.steps // 10)) for label, shape in shapes.items()}
    print(f"batch {args.batch} x {args.seq_len}, {args.threads} thread(s), {args.steps} steps")
    print(f"  draw a batch, python-docs only      {without:8.3f} ms")
    print(f"  draw a batch, python-docs + hops    {with_hops:8.3f} ms  (hops rows: {len(mixed.dense)} probe)")
    for label, ms in steps.items():
        print(f"  train step {label:<12}             {ms:8.3f} ms  (batch drawing {with_hops / ms:.1%} of it)")
    share = with_hops / steps["L1-H96-A6"]
    ok = share < 0.05
    print(f"target: drawing a batch under 5% of the shallowest shape's step: {'met' if ok else 'MISSED'} ({share:.1%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
