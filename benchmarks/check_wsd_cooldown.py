"""WSD cooldown branches against cosine runs of the same length (Hägele et al. 2024, arXiv 2405.18392, Fig. 3
and 4: a WSD run whose cooldown is 20% of its steps reaches the loss of a cosine run trained for exactly that
long, and a 1-sqrt cooldown does slightly better than linear; Hu et al. 2024, MiniCPM, arXiv 2404.06395).

For each shape and seed this trains one WSD run with `horizons` (its constant-LR run with the cooldown
branches at each earlier horizon) and one cosine run per horizon of exactly that many steps, same seed, same
batches, same peak and final learning rate. It prints, per shape and horizon, the validation loss of the
branch and of the cosine run, their difference next to the seed noise (the spread of the cosine losses over
seeds), and the training seconds the one WSD run with its branches took against the cosine runs together.

With `--lrs` (a comma list of peak learning rates) every run is repeated at each LR and each schedule is judged
at its own best LR per horizon (the mean over seeds, minimised over the grid), which is how Hägele et al. compare
them; the chosen LR of each side is printed with a flag when it sits at an edge of the grid.

    python benchmarks/check_wsd_cooldown.py [--steps 800] [--seeds 0,1] [--horizons 0.25,0.5,1] [--lrs 1e-3,3e-3]
"""

from __future__ import annotations

import argparse
import os
import statistics

from depthwidth.artifact.config import TrainConfig, horizon_steps
from depthwidth.shapes.shape import Shape
from depthwidth.train import train

SHAPES = {  # about equal non-embedding parameters (~100K): deep-narrow and shallow-wide
    "L6-H40": Shape(n_layers=6, d_model=40, n_heads=2, vocab_size=256, max_seq_len=64),
    "L1-H96": Shape(n_layers=1, d_model=96, n_heads=4, vocab_size=256, max_seq_len=64),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--horizons", default="0.25,0.5,1")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--lrs", default="", help="comma list of peak LRs: each schedule at its own best LR")
    p.add_argument("--decay-fraction", type=float, default=0.2)
    p.add_argument("--decay-shape", default="1-sqrt")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    horizons = tuple(float(h) for h in args.horizons.split(","))
    lrs = [float(x) for x in args.lrs.split(",")] if args.lrs else [args.lr]
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.steps} steps, seeds {seeds}, "
          f"decay {args.decay_fraction:g} {args.decay_shape}, peak LRs {lrs}")
    base = dict(corpus="shakespeare", seq_len=64, batch_size=16, warmup=max(1, args.steps // 20),
                eval_windows=64, threads=1)
    for label, shape in SHAPES.items():
        wsd_seconds = cosine_seconds = 0.0
        # (lr, horizon) -> the losses over seeds
        branch: dict[tuple[float, float], list[float]] = {(lr, h): [] for lr in lrs for h in horizons}
        cosine: dict[tuple[float, float], list[float]] = {(lr, h): [] for lr in lrs for h in horizons}
        for lr in lrs:
            for seed in seeds:
                run = train(shape, TrainConfig(**base, lr=lr, steps=args.steps, seed=seed, schedule="wsd",
                                               decay_fraction=args.decay_fraction, decay_shape=args.decay_shape,
                                               horizons=horizons))
                # the full run's seconds, plus each branch's cooldown only (before branching it is the run)
                wsd_seconds += run.train_seconds
                for entry in run.horizons:
                    branch[lr, entry["fraction"]].append(entry["val_loss"])
                    if entry["branched_at"] is not None:
                        share = (entry["steps"] - entry["branched_at"]) / entry["steps"]
                        wsd_seconds += entry["train_seconds"] * share
                for h in horizons:
                    done = train(shape, TrainConfig(**base, lr=lr, steps=horizon_steps(args.steps, h), seed=seed))
                    cosine[lr, h].append(done.val_loss)
                    cosine_seconds += done.train_seconds
        if len(lrs) > 1:
            print(f"{label}: mean validation loss over seeds by peak LR (wsd branch / cosine)")
            for h in horizons:
                cells = "  ".join(f"{lr:g}: {statistics.mean(branch[lr, h]):.4f}/{statistics.mean(cosine[lr, h]):.4f}"
                                  for lr in lrs)
                print(f"  horizon {h:g}  {cells}")
        print(f"{'shape':8} {'horizon':>7} {'steps':>6} {'wsd branch':>11} {'lr':>8} {'cosine':>8} {'lr':>8} "
              f"{'diff':>8} {'seed sd':>8}")
        for h in horizons:
            b_lr = min(lrs, key=lambda lr: statistics.mean(branch[lr, h]))
            c_lr = min(lrs, key=lambda lr: statistics.mean(cosine[lr, h]))
            b, c = statistics.mean(branch[b_lr, h]), statistics.mean(cosine[c_lr, h])
            sd = statistics.stdev(cosine[c_lr, h]) if len(seeds) > 1 else float("nan")
            print(f"{label:8} {h:7g} {horizon_steps(args.steps, h):6d} {b:11.4f} {_lr(b_lr, lrs):>8} {c:8.4f} "
                  f"{_lr(c_lr, lrs):>8} {b - c:+8.4f} {sd:8.4f}")
        print(f"{label:8} training seconds: the wsd runs with their branches {wsd_seconds:.1f} s, the cosine runs "
              f"{cosine_seconds:.1f} s (ratio {wsd_seconds / cosine_seconds:.2f})")


def _lr(lr: float, grid: list[float]) -> str:
    """The LR as printed, starred where it is an edge of a grid of more than one LR (the optimum may lie outside)."""
    edge = len(grid) > 1 and lr in (min(grid), max(grid))
    return f"{lr:g}{'*' if edge else ''}"


if __name__ == "__main__":
    main()
