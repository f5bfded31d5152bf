"""What the study machinery costs on top of the training it runs, measured side by side in one process.

The same training runs (a small family: 2 shapes x 2 learning rates, byte tokens, python-docs) are done
three ways, interleaved over rounds, each keeping its best round:
  direct  `depthwidth.train.train(shape, config)` called in a loop (no study, no store)
  local   `run_study(spec, executor="local")` into a fresh folder: spec validation, expansion, SQLite
          writes of runs/curves/results, checkpoints in run folders
  ray     `run_study(spec, executor="ray")` (when the extra is installed): a local Ray cluster started
          and stopped, one task per run
It prints seconds per way and the ratio to direct; the local executor should stay within a few percent
of direct on runs of this size (its fixed costs are a SQLite transaction per run and the run folders),
while Ray adds its start-up (~2-5 s) and runs in parallel on the machine's cores. The load average is
printed: on a shared machine compare ratios of the same round, not absolute times.

    python benchmarks/bench_study.py [--steps 40] [--rounds 2] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

SPEC = """
name = "bench-study"
hardware = "cpu"
[data]
corpus = "python-docs"
seq_len = 64
batch_size = 16
[train]
steps = {steps}
warmup = 4
checkpoint_every = {every}
[eval]
every = {every}
windows = 8
[lr]
grid = [1e-3, 3e-3]
[bench]
enabled = false
[execution]
threads = 1
[[shape]]
n_layers = 2
d_model = 64
n_heads = 4
[[shape]]
n_layers = 8
d_model = 32
n_heads = 4
"""


def direct(spec_path: Path) -> float:
    from depthwidth.shapes.shape import Shape
    from depthwidth.study import prepare
    from depthwidth.study.run_config import train_config_of
    from depthwidth.train import train

    expansion = prepare(spec_path)
    start = time.perf_counter()
    for run in expansion.train_runs:
        config = train_config_of(run.config, threads=1, **expansion.spec.execution_settings())
        train(Shape.from_dict(run.config["shape"]), config)
    return time.perf_counter() - start


def study(spec_path: Path, *, executor: str, root: Path) -> float:
    from depthwidth.study import run_study

    folder = root / f"study-{executor}"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    report = run_study(spec_path, study_dir=folder, executor=executor)
    seconds = time.perf_counter() - start
    assert report.completed == 4, report
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    ways = ["direct", "local"]
    if not args.no_ray:
        try:
            import ray  # noqa: F401

            ways.append("ray")
        except ImportError:
            print("ray extra not installed: skipping the ray executor")
    root = Path(tempfile.mkdtemp(prefix="dw-bench-study-"))
    spec_path = root / "spec.toml"
    spec_path.write_text(SPEC.format(steps=args.steps, every=max(1, args.steps // 4)))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    direct(spec_path)  # warm-up: tokenization cache, peak-FLOP/s measurement, imports
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for way in ways:
            seconds = direct(spec_path) if way == "direct" else study(spec_path, executor=way, root=root)
            best[way] = min(best.get(way, float("inf")), seconds)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"4 training runs of {args.steps} steps, best of {args.rounds} rounds")
    print(f"{'way':8s} {'seconds':>8s} {'/ direct':>9s}")
    for way in ways:
        print(f"{way:8s} {best[way]:8.2f} {best[way] / best['direct']:9.3f}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
