"""Communication of one run over two CPU processes (gloo), measured next to the analytic prediction.

1. Tensor parallelism (tp = 2) of a deep-narrow and a shallow-wide shape of equal block parameters
   (12 L d^2: L16-H128 and L4-H256): measured all-reduce bytes and seconds per token, the analytic
   bytes (`depthwidth.shapes.collectives`, exact) and seconds (ring model with the link measured by
   `depthwidth hw measure --collectives`, measured here first), and the deep/wide ratio of each. Megatron
   TP sends (2 + columns) activations of d_model per layer and token, so bytes per token go as L x d:
   deep/wide = (16 x 128) / (4 x 256) = 2.
2. Data parallelism: DDP with 2 processes against 1 process, same global batch: step time (the mean
   over timed steps), and DDP's all-reduce bytes (4 bytes per parameter) and time.
Runs alternate (deep, wide, deep, wide; 1, 2, 1, 2 processes). Absolute times on a shared 2-core CPU mean
little; the byte counts and the ratios are the result. The meter waits for each collective (it removes
DDP's overlap), so the step times of metered runs include that.

    /work/coord/quiet .venv/bin/python benchmarks/bench_comm.py [--steps 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from depthwidth.data import load_dataset  # noqa: E402
from depthwidth.machine.collective import measure_link  # noqa: E402
from depthwidth.shapes import Shape  # noqa: E402
from depthwidth.train import TrainConfig, train  # noqa: E402

DEEP = dict(n_layers=16, d_model=128, n_heads=4)
WIDE = dict(n_layers=4, d_model=256, n_heads=4)


def corpus(folder: Path) -> Path:
    from pydoc_data.topics import topics

    path = folder / "corpus.txt"
    path.write_text("".join(topics[k] for k in sorted(topics))[:200_000], encoding="utf-8")
    return path


def per_token(result, kind="all_reduce"):
    k = result.comm["kinds"][kind]
    tokens = result.comm["tokens_per_step"]
    return k["bytes"] / tokens, k["seconds"] / tokens, k["predicted_bytes"] / tokens, (
        k["predicted_seconds"] / tokens if k["predicted_seconds"] is not None else float("nan"))


def step_seconds(result) -> float:
    timed = [c["seconds"] for c in result.curve if c["step"] > 0]
    return statistics.mean(timed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = str(tmp / "cache")
        text = corpus(tmp)
        ds = load_dataset(corpus=str(text), tokenizer="byte", val_fraction=0.1, test_fraction=0.0, cache_dir=cache)
        link = measure_link(backend="gloo", ranks=2, cache=cache)
        print(f"link (gloo, 2 processes, measured now): {link.bandwidth / 1e9:.2f} GB/s bus bandwidth, "
              f"{link.latency_s * 1e6:.0f} us per ring step")
        base = TrainConfig(corpus=str(text), seq_len=64, batch_size=8, steps=args.steps, threads=1, eval_windows=4,
                           cache_dir=cache, peak_flops=1e11)
        shapes = {name: Shape(**s, vocab_size=ds.vocab_size, max_seq_len=64) for name, s in
                  (("deep", DEEP), ("wide", WIDE))}
        tp: dict[str, list] = {"deep": [], "wide": []}
        for _ in range(args.repeat):
            for name, shape in shapes.items():
                tp[name].append(train(shape, base.with_(nproc=2, tp=2), dataset=ds))
        print("\n1. tensor parallel, tp = 2, per token (mean of", args.repeat, "runs)")
        print(f"{'shape':6} {'block params':>12} {'meas B/tok':>11} {'pred B/tok':>11} {'meas us/tok':>12} "
              f"{'pred us/tok':>12} {'comm/step':>9}")
        rows = {}
        for name, results in tp.items():
            vals = [per_token(r) for r in results]
            mb, ms, pb, ps = (statistics.mean(v[i] for v in vals) for i in range(4))
            frac = statistics.mean(r.comm_fraction for r in results)
            rows[name] = (mb, ms, pb, ps)
            sh = shapes[name]
            print(f"{sh.label():6} {12 * sh.n_layers * sh.d_model ** 2:>12,} {mb:>11,.0f} {pb:>11,.0f} "
                  f"{ms * 1e6:>12.2f} {ps * 1e6:>12.2f} {frac:>9.0%}")
            assert all(r.comm["kinds"]["all_reduce"]["bytes"] == r.comm["kinds"]["all_reduce"]["predicted_bytes"]
                       for r in results), "measured bytes differ from the analytic bytes"
        d, w = rows["deep"], rows["wide"]
        print(f"deep/wide: bytes measured {d[0] / w[0]:.3f}, predicted {d[2] / w[2]:.3f}; "
              f"seconds measured {d[1] / w[1]:.2f}, predicted {d[3] / w[3]:.2f}")
        shape = shapes["wide"]
        dp: dict[int, list] = {1: [], 2: []}
        for _ in range(args.repeat):
            for n in (1, 2):
                dp[n].append(train(shape, base.with_(nproc=n), dataset=ds))
        t1 = statistics.mean(step_seconds(r) for r in dp[1])
        t2 = statistics.mean(step_seconds(r) for r in dp[2])
        ar = [r.comm["kinds"]["all_reduce"] for r in dp[2]]
        print(f"\n2. DDP, {shape.label()}, global batch {base.batch_size} x {base.seq_len}: step {t1 * 1e3:.1f} ms "
              f"(1 process) vs {t2 * 1e3:.1f} ms (2 processes): {t1 / t2:.2f}x; all-reduce "
              f"{ar[0]['bytes']:,.0f} B/step (predicted {ar[0]['predicted_bytes']:,}), "
              f"{statistics.mean(a['seconds'] for a in ar) * 1e3:.1f} ms measured vs "
              f"{statistics.mean(a['predicted_seconds'] for a in ar) * 1e3:.1f} ms predicted")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
