"""Where a training step's time goes: `depthwidth.train.train` against the plain loop of bench_train.py, phase by
phase, wall clock.

Each phase is timed by wrapping the function that does it, for both sides alike: the model's forward
(`Transformer.forward`), backward (`Tensor.backward`), clipping (`clip_grad_norm_`), the optimizer step
(`AdamW.step`), `zero_grad`; for ours also the batch (`_Run._batch`: positions, hashing, the copy to the
device), the bookkeeping flush (`_Run._flush`: the loss read-back, curve points, progress) and the rest of the
step (learning rate per group, the loop); for the plain loop the batch (`BatchStream.batch` and the copy).
"other" is the wall time of the timed steps less every timed phase. Rounds alternate ours and plain; each
cell is the median over rounds of the mean ms per step (warm-up steps excluded).

    python benchmarks/profile_train_step.py [--shapes 16x64,1x256] [--steps 12] [--warmup 2] [--rounds 3]
        [--adamw fused,foreach] [--threads N] [--batch 32] [--seq-len 128]

`--adamw` runs ours once per AdamW implementation (the plain loop always uses torch's default AdamW, no
clipping: the loop of a user who writes their own).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_train import busy_jiffies, groups_of, plain_loop  # noqa: E402

import depthwidth.train.loop as loop_mod  # noqa: E402
from depthwidth.data import BatchStream, load_dataset  # noqa: E402
from depthwidth.model import Transformer  # noqa: E402
from depthwidth.shapes import Shape  # noqa: E402
from depthwidth.train import TrainConfig, train  # noqa: E402

PHASES = ("batch", "forward", "backward", "clip", "optimizer", "zero_grad", "flush")


class Timers:
    """Accumulated wall seconds per phase while `active`; nested phases count in the outer one only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.active = False
        self._depth = 0

    def wrap(self, owner, name: str, phase: str):
        real = getattr(owner, name)
        timers = self

        def timed(*args, **kwargs):
            if not timers.active or timers._depth:
                return real(*args, **kwargs)
            timers._depth += 1
            t = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                timers.seconds[phase] += time.perf_counter() - t
                timers._depth -= 1

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, real)


def patched(timers: Timers):
    stack = contextlib.ExitStack()
    for owner, name, phase in ((Transformer, "forward", "forward"), (torch.Tensor, "backward", "backward"),
                               (torch.nn.utils, "clip_grad_norm_", "clip"), (torch.optim.AdamW, "step", "optimizer"),
                               (torch.optim.Optimizer, "zero_grad", "zero_grad"), (loop_mod._Run, "_batch", "batch"),
                               (loop_mod._Run, "_flush", "flush"), (BatchStream, "batch", "batch")):
        stack.callback(timers.wrap(owner, name, phase))
    return stack


def ours(shape, config, dataset, timers: Timers, warmup: int) -> float:
    marks = {}

    def progress(p):
        if p.phase == "train" and p.step in (warmup, config.total_steps):
            marks[p.step] = time.perf_counter()
            timers.active = p.step == warmup  # from the end of the warm-up to the last step

    timers.active = False
    result = train(shape, config, dataset=dataset, progress=progress)
    timers.active = False
    if result.status != "completed":
        raise SystemExit(f"ours: {result.status} {result.error}")
    return marks[config.total_steps] - marks[warmup]


def plain(shape, config, dataset, timers: Timers, warmup: int) -> float:
    torch.manual_seed(config.seed)
    model = Transformer(shape).train()
    groups = groups_of(list(model.named_parameters()), config, ("embed.weight", "pos_embed.weight"))
    stream = BatchStream(dataset, seq_len=config.seq_len, batch_size=config.batch_size, seed=config.seed)
    timers.active = False
    seconds, _ = plain_loop(model, groups, config, stream, torch.device("cpu"), warmup=warmup, hf=False,
                            adamw="default", clip=False, on_warm=lambda: setattr(timers, "active", True))
    timers.active = False
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="16x64,1x256")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--adamw", default="fused,foreach")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dataset = load_dataset(corpus="shakespeare", tokenizer="byte")
    kernels = args.adamw.split(",")
    print(f"per-phase wall ms per step: seq {args.seq_len}, batch {args.batch}, {args.steps} steps "
          f"({args.warmup} warm-up) x {args.rounds} rounds, {args.threads} threads, torch {torch.__version__}; "
          f"load average {os.getloadavg()[0]:.2f}")
    timers = Timers()
    with patched(timers):
        for dims in args.shapes.split(","):
            L, H = (int(v) for v in dims.split("x"))
            shape = Shape(n_layers=L, d_model=H, n_heads=max(1, H // 64), vocab_size=dataset.vocab_size,
                          max_seq_len=args.seq_len, bias="all")
            base = TrainConfig(corpus="shakespeare", seq_len=args.seq_len, batch_size=args.batch, steps=args.steps,
                               threads=args.threads, eval_windows=2, device="cpu")
            who = {**{f"ours {k}": (ours, base.with_(adamw=k)) for k in kernels}, "plain": (plain, base)}
            cells: dict[str, dict[str, list[float]]] = {w: collections.defaultdict(list) for w in who}
            timed_steps = args.steps - args.warmup
            busy0, wall0 = busy_jiffies(), time.perf_counter()
            for r in range(args.rounds + 1):  # round 0 warms every contender up and is not counted
                names = list(who)[r % len(who):] + list(who)[: r % len(who)]
                for name in names:
                    fn, config = who[name]
                    timers.seconds.clear()
                    wall = fn(shape, config, dataset, timers, args.warmup)
                    if r == 0:
                        continue
                    for phase in PHASES:
                        cells[name][phase].append(1e3 * timers.seconds.get(phase, 0.0) / timed_steps)
                    cells[name]["other"].append(1e3 * (wall - sum(timers.seconds.values())) / timed_steps)
                    cells[name]["total"].append(1e3 * wall / timed_steps)
            busy1 = busy_jiffies()
            other_cores = max(0.0, (busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / (time.perf_counter() - wall0)
            print(f"\nL{L}-H{H}: other processes used {other_cores:.2f} cores meanwhile"
                  + (" (NOT quiet)" if other_cores > 0.25 else ""))
            print(f"{'phase':>10} " + " ".join(f"{w:>13}" for w in who))
            for phase in (*PHASES, "other", "total"):
                print(f"{phase:>10} " + " ".join(f"{statistics.median(cells[w][phase]):>13.2f}" for w in who))
            plain_total = statistics.median(cells["plain"]["total"])
            print(f"{'plain/ours':>10} " + " ".join(f"{plain_total / statistics.median(cells[w]['total']):>13.3f}"
                                                  for w in who))
    return 0


if __name__ == "__main__":
    sys.exit(main())
