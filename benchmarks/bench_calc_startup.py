"""Start-up cost of `depthwidth calc --json` as a whole process, next to `import torch`.

`calc` is pure Python and never imports torch, so answering one shape question should cost a small
fraction of what merely importing torch costs. Both are timed in the same run, alternating, as
separate processes (median of several repetitions); the bare interpreter is timed for reference.

Target: calc under a third of the torch import. Exit status 1 when the target is missed.

    python benchmarks/bench_calc_startup.py [--reps 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "depthwidth calc --preset gpt2-small --json": [
        sys.executable, "-m", "depthwidth", "calc", "--preset", "gpt2-small", "--json",
    ],
    'python -c "import torch"': [sys.executable, "-c", "import torch"],
}
TARGET = 1 / 3


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="repetitions per command (default 7)")
    args = parser.parse_args()
    for cmd in COMMANDS.values():  # warm the page cache once
        wall(cmd)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.reps):
        for name, cmd in COMMANDS.items():
            times[name].append(wall(cmd))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    width = max(map(len, COMMANDS))
    print(f"{'command':<{width}}  median s   min s    max s   (n={args.reps})")
    for name, ts in times.items():
        print(f"{name:<{width}}  {med[name]:8.3f} {min(ts):7.3f} {max(ts):8.3f}")
    calc = med["depthwidth calc --preset gpt2-small --json"]
    torch_import = med['python -c "import torch"']
    ratio = calc / torch_import
    verdict = "met" if ratio < TARGET else "MISSED"
    print(f"calc / import torch = {ratio:.3f} (target < {TARGET:.3f}: {verdict})")
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
