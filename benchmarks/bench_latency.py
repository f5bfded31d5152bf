"""Predicted forward time (roofline on this machine's measured profile) next to the measured forward
time of our own model, for an equal-parameter family at batch 1 and 8 and a few sequence lengths.

Steps, all in one run: `measure_profile(threads=2)` (GEMM peak per path, copy bandwidth, per-op cost);
`plan_family` at a fixed parameter count on a small CPU grid; for each member, batch and length,
`predict_forward(..., dtype="fp32")` on `profile_to_hardware(profile)` (best GEMM path: oneDNN on this
CPU) and on `profile_to_hardware(profile, gemm_path="torch.mm")` (the path an eager fp32 nn.Linear
takes), and the measured time of `Transformer(shape)` forwards (eager, no grad, fp32, SDPA attention,
2 threads; median and min of repeats, taken in interleaved rounds). Ratio = measured median /
predicted; 1.0 is a perfect prediction, > 1 means the roofline is optimistic. Nothing is fitted: the model is the plain module
and the profile is measured once.

    python benchmarks/bench_latency.py [--params 5e6] [--reps 7] [--profile PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from depthwidth.bench.hw import eager_block_overhead
from depthwidth.machine import load_profile, measure_profile, profile_to_hardware
from depthwidth.model import Transformer
from depthwidth.shapes.families import plan_family
from depthwidth.shapes.latency import predict_forward
from depthwidth.shapes.shape import Shape

THREADS = 2
BATCHES = (1, 8)
SEQ_LENS = (64, 256, 512)


def measure_points(models: dict[str, Transformer], points: list[tuple[str, int, int]], *,
                   reps: int) -> dict[tuple[str, int, int], list[float]]:
    """Seconds of no-grad forwards per (shape label, batch, seq_len), in interleaved rounds (every point
    once per round, after one warm-up round), so that other work on the machine hits all shapes alike."""
    gen = torch.Generator().manual_seed(0)
    inputs = {pt: torch.randint(0, models[pt[0]].shape.vocab_size, (pt[1], pt[2]), generator=gen)  # (B, T)
              for pt in points}
    samples: dict[tuple[str, int, int], list[float]] = {pt: [] for pt in points}
    with torch.no_grad():
        for round_ in range(reps + 1):
            for pt in points:
                start = time.perf_counter()
                models[pt[0]](inputs[pt])
                if round_:  # round 0 warms up
                    samples[pt].append(time.perf_counter() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=float, default=5e6, help="family parameter count (default 5e6)")
    parser.add_argument("--reps", type=int, default=7, help="timed forwards per point (default 7)")
    parser.add_argument("--profile", help="use this saved profile instead of measuring one now")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    profile = load_profile(args.profile) if args.profile else measure_profile(threads=THREADS, device="cpu", block_overhead=eager_block_overhead)
    best = profile_to_hardware(profile)
    default_path = profile_to_hardware(profile, gemm_path="torch.mm")
    print(f"machine: {profile.device_name}, {profile.threads} threads, torch {profile.torch_version}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("profile: " + ", ".join(f"{g.dtype} {g.path} {g.flops_per_s / 1e9:.0f} GFLOP/s" for g in profile.gemm)
          + f"; copy {profile.copy_bandwidth / 1e9:.1f} GB/s; per-op {profile.op_overhead_s * 1e6:.2f} us")
    base = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=256, max_seq_len=max(SEQ_LENS))
    family = plan_family(base=base, params=args.params, align=32, head_dim=32, count=4)
    print(f"family: {len(family.members)} shapes at {args.params / 1e6:g}M parameters (vocab 256, align 32, "
          f"head_dim 32), depth span {family.depth_span:.1f}x")
    header = (f"{'shape':<14}{'params':>8}{'batch':>6}{'seq':>5}{'median ms':>11}{'min ms':>9}{'pred ms':>9}"
              f"{'ratio':>7}{'pred(mm) ms':>13}{'ratio(mm)':>10}{'compute%':>9}")
    print(header)
    print("-" * len(header))
    models = {}
    for member in family.members:
        torch.manual_seed(0)
        models[member.shape.label()] = Transformer(member.shape).eval()
    points = [(m.shape.label(), b, t) for m in family.members for b in BATCHES for t in SEQ_LENS]
    samples = measure_points(models, points, reps=args.reps)
    rows = []
    for member in family.members:
        shape = member.shape
        for batch in BATCHES:
            for seq_len in SEQ_LENS:
                times = samples[(shape.label(), batch, seq_len)]
                measured, fastest = statistics.median(times), min(times)
                pred = predict_forward(shape, hardware=best, batch=batch, seq_len=seq_len, dtype="fp32")
                pred_mm = predict_forward(shape, hardware=default_path, batch=batch, seq_len=seq_len, dtype="fp32")
                row = {"shape": shape.label(), "params": member.params, "batch": batch, "seq_len": seq_len,
                       "measured_s": measured, "measured_min_s": fastest, "predicted_s": pred.total_s,
                       "ratio": measured / pred.total_s, "predicted_mm_s": pred_mm.total_s,
                       "ratio_mm": measured / pred_mm.total_s, "compute_bound_share": pred.compute_bound_share,
                       "overhead_s": pred.overhead_s}
                rows.append(row)
                print(f"{row['shape']:<14}{member.params / 1e6:>7.2f}M{batch:>6}{seq_len:>5}{measured * 1e3:>11.2f}"
                      f"{fastest * 1e3:>9.2f}{pred.total_s * 1e3:>9.2f}{row['ratio']:>7.2f}"
                      f"{pred_mm.total_s * 1e3:>13.2f}{row['ratio_mm']:>10.2f}{pred.compute_bound_share * 100:>8.0f}%")
    ratios = [r["ratio"] for r in rows]
    ratios_mm = [r["ratio_mm"] for r in rows]
    print(f"measured/predicted (best GEMM path): median {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}")
    print(f"measured/predicted (torch.mm path):  median {statistics.median(ratios_mm):.2f}, "
          f"range {min(ratios_mm):.2f}-{max(ratios_mm):.2f}")
    agree = total = 0
    for batch in BATCHES:
        for seq_len in SEQ_LENS:
            point = [r for r in rows if r["batch"] == batch and r["seq_len"] == seq_len]
            for i in range(len(point)):
                for j in range(i + 1, len(point)):
                    total += 1
                    a, b = point[i], point[j]
                    agree += (a["measured_s"] < b["measured_s"]) == (a["predicted_s"] < b["predicted_s"])
    print(f"pairs of shapes ordered the same way by prediction and measurement: {agree}/{total}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other work on the machine inflates the measured "
          "medians; the profile takes best-of times)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"profile": profile.to_dict(), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
