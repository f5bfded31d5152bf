"""`compile = "auto"` on the classic CPU character model: eager, auto and always-compiled runs side by side.

The model is nanoGPT's CPU example (4 layers x 128 wide, 4 heads, context 64, batch 12) on Shakespeare with
byte tokens, `--steps` steps (default 2000). Each run is a fresh spawned process, as a study's worker is (the
compile's fixed start-up cost is paid per process), and its wall clock is the whole `train()` call:
compilation, every step and the final evaluation. Runs alternate eager / auto / compiled for `--rounds`
rounds. Printed: the wall seconds (median over rounds), the final validation loss of each (eager against
compiled: equal to about 1e-4, not bit for bit), and what "auto" decided (`TrainResult.compile_auto`: the
eager and compiled step seconds it judged from, the compile seconds, the break-even step count, and whether
they came from the reference or from this shape's own record).

The first auto run on a machine measures the reference (`train.compile_auto.measure_reference`, about a
minute, outside the timed call: `--fresh` times it inside by starting from an empty record). A compiled run
records its own step and compile seconds, so the next auto run of the same shape judges from them.

    python benchmarks/bench_compile.py [--steps 2000] [--rounds 1] [--threads 2] [--fresh]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time


def child(mode, steps: int, threads: int, cache: str | None, conn) -> None:
    if cache:
        os.environ["DEPTHWIDTH_CACHE"] = cache
    from depthwidth.shapes import Shape
    from depthwidth.train import TrainConfig, train

    shape = Shape(n_layers=4, d_model=128, n_heads=4, vocab_size=256, max_seq_len=64, bias="all")
    config = TrainConfig(corpus="shakespeare", seq_len=64, batch_size=12, steps=steps, threads=threads,
                         compile={"eager": False, "auto": "auto", "compiled": True}[mode], eval_windows=32,
                         warmup=min(100, steps // 10), lr=1e-3)
    t = time.perf_counter()
    result = train(shape, config)
    conn.send((time.perf_counter() - t, result.val_loss, result.compiled, result.compile_auto,
               result.tokens_per_s, result.status))


def run(mode, args, cache):
    ctx = multiprocessing.get_context("spawn")
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=child, args=(mode, args.steps, args.threads, cache, theirs))
    proc.start()
    theirs.close()
    try:
        return mine.recv()
    except EOFError:
        raise SystemExit(f"{mode}: the run's process ended without a result (exit code {proc.join() or proc.exitcode})")
    finally:
        proc.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--fresh", action="store_true", help="an empty compile record: auto measures the reference")
    args = parser.parse_args()
    cache = None
    if args.fresh:
        cache = tempfile.mkdtemp(prefix="dw-compile-")
        home = os.path.expanduser(os.environ.get("DEPTHWIDTH_CACHE", "~/.cache/depthwidth"))
        for name in ("tokens", "hw-profile.json"):  # the token cache and profile, not the compile record
            if os.path.exists(os.path.join(home, name)):
                os.symlink(os.path.join(home, name), os.path.join(cache, name))
    print(f"character model L4-H128-A4, context 64, batch 12, {args.steps} steps, {args.threads} threads; "
          f"load average at start {os.getloadavg()[0]:.2f}", flush=True)
    modes = ("eager", "auto", "compiled")
    got = {m: [] for m in modes}
    for r in range(args.rounds):
        for m in modes[r % 3:] + modes[:r % 3]:
            got[m].append(run(m, args, cache))
            wall, loss, compiled, auto, tps, status = got[m][-1]
            print(f"  round {r}: {m:>8}: {wall:7.1f} s wall, val loss {loss:.6f}, compiled {compiled}, "
                  f"{tps:,.0f} tok/s, {status}", flush=True)
    wall = {m: statistics.median(v[0] for v in got[m]) for m in modes}
    loss = {m: got[m][-1][1] for m in modes}
    print(f"wall (median): eager {wall['eager']:.1f} s, auto {wall['auto']:.1f} s "
          f"({wall['auto'] / wall['eager']:.3f}x eager), compiled {wall['compiled']:.1f} s "
          f"({wall['compiled'] / wall['eager']:.3f}x eager)")
    print(f"val loss: eager {loss['eager']:.6f}, compiled {loss['compiled']:.6f} "
          f"(|difference| {abs(loss['eager'] - loss['compiled']):.2e}), auto {loss['auto']:.6f}")
    for i, (_, _, compiled, auto, _, _) in enumerate(got["auto"]):
        print(f"auto decision (round {i}): {auto}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
