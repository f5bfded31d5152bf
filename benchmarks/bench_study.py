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

`--workers` measures instead the demo's training runs (`depthwidth demo`'s spec, its benchmarks off,
`--tokens` per run) as `depthwidth study run` does them, each way in a fresh folder and a fresh process,
interleaved over rounds:
  chosen    the default workers (`depthwidth.study.threads`: on 2 cores, two 1-thread runs at once)
  one       --workers 1: the same 1-thread runs one after another (the same stored losses, checked)
  one-2t    --workers 1 with execution.threads = 2: one run at a time on every core (the old default;
            its losses may differ in the last bits, the thread count changes float sums, and it says so)

    python benchmarks/bench_study.py [--steps 40] [--rounds 2] [--no-ray]
    python benchmarks/bench_study.py --workers [--tokens 60000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
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


def demo_training_spec(tokens: int, *, threads: int | None = None) -> str:
    """The demo's spec with `tokens` per run, its benchmarks off (and execution.threads when given)."""
    from depthwidth.study.demo import demo_spec_text

    text = demo_spec_text()
    text, n = re.subn(r"(?m)^tokens\s*=\s*[0-9_]+", f"tokens = {tokens}", text, count=1)
    assert n == 1, "the demo spec has no [train] tokens line"
    text, n = re.subn(r"(?m)^\[bench\][^\n]*$", "[bench]\nenabled = false", text, count=1)
    assert n == 1, "the demo spec has no [bench] section"
    if threads is not None:
        text += f"\n[execution]\nthreads = {threads}\n"
    return text


def stored_losses(folder: Path) -> dict:
    from depthwidth.study import Store

    with Store.open(folder) as store:
        return {r.run_id: (r.status, store.result(r.run_id).val_loss,
                           tuple(p.train_loss for p in store.curves(r.run_id)))
                for r in store.runs(kind="train")}


def timed_study(spec: Path, folder: Path, *extra: str) -> float:
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "depthwidth", "study", "run", str(spec), "--dir", str(folder),
                          "--json", *extra], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"study failed: {out.stderr[-800:]}")
    report = json.loads(out.stdout)["run"]
    assert report["failed"] == 0, report
    return seconds


def workers_main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="dw-bench-workers-"))
    specs = {"chosen": root / "chosen.toml", "one": root / "chosen.toml", "one-2t": root / "two.toml"}
    specs["chosen"].write_text(demo_training_spec(args.tokens))
    specs["one-2t"].write_text(demo_training_spec(args.tokens, threads=2))
    extra = {"chosen": (), "one": ("--workers", "1"), "one-2t": ("--workers", "1")}
    print("uptime before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    timed_study(specs["chosen"], root / "warm")  # the corpus's token cache, the profile for the MFU peak
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for way in ("chosen", "one", "one-2t"):
            best[way] = min(best.get(way, float("inf")), timed_study(specs[way], root / way, *extra[way]))
    print("uptime after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    losses = {way: stored_losses(root / way) for way in best}
    print(f"the demo's {len(losses['chosen'])} training runs, {args.tokens} tokens each, benchmarks off; "
          f"best of {args.rounds} round(s), wall clock of `depthwidth study run` (process start included)")
    print(f"{'way':8s} {'seconds':>8s} {'/ chosen':>9s}  stored losses")
    for way in best:
        same = "identical to chosen" if losses[way] == losses["chosen"] else "differ from chosen"
        if way == "chosen":
            same = "-"
        print(f"{way:8s} {best[way]:8.1f} {best[way] / best['chosen']:9.2f}  {same}")
    if losses["one"] != losses["chosen"]:
        raise SystemExit("the workers changed the stored losses")
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--workers", action="store_true", help="the demo's training runs: chosen workers vs one")
    parser.add_argument("--tokens", type=int, default=60_000, help="with --workers: training tokens per run")
    args = parser.parse_args()
    if args.workers:
        workers_main(args)
        return
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
