"""Serving cost of depth at equal parameters on this machine, measured next to the roofline.

One run benchmarks an iso-parameter family (the planner's `plan_family`: ~2M non-embedding
parameters, byte vocabulary, depths from 2 to ~26) with `depthwidth.bench.serving.bench`, in fp32 and
bf16: batch-1 time to first token, batch-1 decode latency per token at two context lengths, and
batched generation throughput. Every number is printed with the roofline prediction for the measured
hardware profile of this machine and the ratio measured / predicted, plus the deepest/shallowest
ratio of each, measured and predicted: does the roofline (with its per-op cost) see the depth penalty?

Rounds go over the whole family in turn and each point keeps its best round (lowest median), so
load from other processes on a shared machine distorts the comparison less; the load average before
and after is printed. One thread by default: on a busy 2-core machine two threads made decode medians
~5x worse (one OpenMP thread waits for the other whenever it is descheduled) and the run 10x longer.
No pass/fail target: the point is the side-by-side table. About 40 s with one thread.

    python benchmarks/bench_serving.py [--dtypes fp32,bf16] [--rounds 3] [--repeat 3] [--threads 1]
                                       [--fresh-profile] [--device cpu|cuda|cuda:N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from rich.console import Console
from rich.table import Table

from depthwidth.bench.serving import BenchConfig, bench
from depthwidth.machine import profile_path
from depthwidth.shapes.families import plan_family
from depthwidth.shapes.shape import Shape

BASE = Shape(n_layers=1, d_model=64, n_heads=4, vocab_size=256, max_seq_len=512)
PARAMS = 2e6  # non-embedding
PROMPT = 128
CONTEXTS = (64, 256)
BATCHES = (1, 8, 32)


def family() -> list[Shape]:
    fam = plan_family(base=BASE, params=PARAMS, non_embedding=True, count=5, align=16, head_dim=16,
                      aspect_range=(2.0, 512.0))
    return sorted((m.shape for m in fam.members), key=lambda s: s.n_layers)


def _ms(x: float) -> str:
    return f"{x * 1e3:.3f}"


def _points(result) -> dict[tuple, object]:
    """Every measured point of one result, keyed by what it measures."""
    out: dict[tuple, object] = {(p.kind, p.tokens): p for p in result.latency}
    out.update({("generation", t.batch): t for t in result.throughput})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated, from fp32,bf16")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the family (default 3)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions per point per round (default 3)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on a shared 2-core machine two threads wait on each "
                             "other whenever another process runs, and medians grow several-fold)")
    parser.add_argument("--fresh-profile", action="store_true",
                        help="measure the hardware profile again first (and store it) instead of reusing it")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    parser.add_argument("--json", metavar="PATH", help="also write every result as JSON")
    args = parser.parse_args()
    import torch

    from depthwidth.bench.hw import eager_block_overhead
    from depthwidth.machine import measure_profile, save_profile
    from depthwidth.shapes.params import count_params

    if args.fresh_profile:
        threads = args.threads or torch.get_num_threads()
        save_profile(measure_profile(threads=threads, block_overhead=eager_block_overhead),
                     profile_path(threads=threads))
    shapes = family()
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    console = Console(width=None if sys.stdout.isatty() else 150)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    # Rounds go over the whole family in turn, so a burst of load from other processes hits one round
    # of every shape rather than every round of one shape; each point keeps its round of lowest median.
    best: dict[tuple[str, str], dict[tuple, object]] = {}
    raw = []
    for rnd in range(args.rounds):
        for dtype in dtypes:
            config = BenchConfig(prompt_lens=(PROMPT,), contexts=CONTEXTS, batches=BATCHES, dtype=dtype,
                                 repeat=args.repeat, warmup=args.warmup, threads=args.threads, new_tokens=16,
                                 throughput_prompt_len=16, device=args.device)
            for shape in shapes:
                print(f"  round {rnd + 1}/{args.rounds} {dtype} {shape.label()}", file=sys.stderr, flush=True)
                result = bench(shape, config)
                raw.append({"round": rnd, "shape": shape.label(), "dtype": dtype, "result": result.to_dict()})
                kept = best.setdefault((shape.label(), dtype), {})
                for key, point in _points(result).items():
                    if key not in kept or point.timing.median < kept[key].timing.median:
                        kept[key] = point
                env, hw = result.environment, result.hardware
    elapsed = time.perf_counter() - t0
    load_after = os.getloadavg()
    console.print(f"iso-parameter family, {PARAMS / 1e6:.0f}M non-embedding params, vocab {BASE.vocab_size}; "
                  f"torch {env['torch']}, {env['threads']} threads; predictions for {hw['label']} "
                  f"(fp32 {hw['peak_flops']['fp32'] / 1e9:.0f} GFLOP/s, bf16 {hw['peak_flops']['bf16'] / 1e9:.0f} "
                  f"GFLOP/s, {hw['mem_bandwidth'] / 1e9:.1f} GB/s, {hw['op_overhead_s'] * 1e6:.1f} us/op); "
                  f"{elapsed:.0f} s; load average {load_before[0]:.1f} -> {load_after[0]:.1f}; "
                  f"measured = median of the best of {args.rounds} interleaved rounds x {args.repeat} repeats")

    lat = Table(title=f"Batch-1 latency (ms): prefill of {PROMPT} tokens, one decode step at each context")
    for col in ("dtype", "shape", "L", "non-emb params", f"prefill {PROMPT}", "pred", "ratio",
                *(x for c in CONTEXTS for x in (f"decode @{c}", "pred", "ratio"))):
        lat.add_column(col, justify="left" if col in ("dtype", "shape") else "right")
    tput = Table(title="Generation throughput (tokens/s; prompt 16, 16 new tokens, prefill included)")
    for col in ("dtype", "shape", *(x for b in BATCHES for x in (f"batch {b}", "pred", "ratio"))):
        tput.add_column(col, justify="left" if col in ("dtype", "shape") else "right")
    for dtype in dtypes:
        for shape in shapes:
            pts = best[(shape.label(), dtype)]
            pre, dec = pts[("prefill", PROMPT)], {c: pts[("decode", c)] for c in CONTEXTS}
            lat.add_row(dtype, shape.label(), str(shape.n_layers), f"{count_params(shape).non_embedding:,}",
                        _ms(pre.timing.median), _ms(pre.predicted_s), f"{pre.ratio:.2f}",
                        *(x for c in CONTEXTS for x in (_ms(dec[c].timing.median), _ms(dec[c].predicted_s),
                                                        f"{dec[c].ratio:.2f}")))
            tp = {b: pts[("generation", b)] for b in BATCHES}
            tput.add_row(dtype, shape.label(),
                         *(x for b in BATCHES for x in (f"{tp[b].tokens_per_s:,.0f}",
                                                        f"{tp[b].predicted_tokens_per_s:,.0f}", f"{tp[b].ratio:.2f}")))
    console.print(lat)
    for dtype in dtypes:
        for kind, keys in (("prefill", [("prefill", PROMPT)]), ("decode", [("decode", c) for c in CONTEXTS])):
            ratios = [best[(shape.label(), dtype)][key].ratio for shape in shapes for key in keys]
            worst = max(ratios, key=lambda r: max(r, 1 / r))
            console.print(f"{dtype} {kind}: measured/predicted median {sorted(ratios)[len(ratios) // 2]:.2f}, "
                          f"worst {worst:.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")
    console.print(tput)

    depth = Table(title=f"Deepest / shallowest ({shapes[-1].label()} / {shapes[0].label()}), time ratios")
    for col in ("dtype", "what", "measured", "predicted"):
        depth.add_column(col, justify="left" if col in ("dtype", "what") else "right")
    keys = [("prefill", PROMPT)] + [("decode", c) for c in CONTEXTS] + [("generation", b) for b in BATCHES]
    for dtype in dtypes:
        shallow, deep = best[(shapes[0].label(), dtype)], best[(shapes[-1].label(), dtype)]
        for key in keys:
            a, b = shallow[key], deep[key]
            what = f"{key[0]} {'@' if key[0] == 'decode' else 'batch ' if key[0] == 'generation' else ''}{key[1]}"
            depth.add_row(dtype, what, f"{b.timing.median / a.timing.median:.2f}",
                          f"{b.predicted_s / a.predicted_s:.2f}")
    console.print(depth)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(raw, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
