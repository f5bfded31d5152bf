"""How a study's runs share this machine: the torch threads of each run and the worker processes.

The thread count of a run is a pure function of the run (its shape and batch) and the machine (its
cores), never of the moment's load: float sums depend on it, so a study killed at any moment and
started again under any load must train every run on the same count. It is written in the run's
folder (run.json, by the trainer) and a resumed run keeps the count it started with, even when the
machine or `execution.threads` changed since. `execution.threads` fixes it for every run.

Measured with benchmarks/bench_threads.py on this project's 2-core machine (Intel Xeon, Sapphire
Rapids, AVX-512 and AMX, torch 2.13 CPU, quiet machine, fp32, AdamW, synchronized 5 s windows, best
of 2 rounds; the two largest 15 s, one round): tokens/s of two 1-thread runs side by side over one
2-thread run, against the size of one block matmul of a step, 2 x tokens per step x d_model^2:
    L1-H32   seq 32  batch 8    0.5 MFLOP   2.17x  (187.7k vs 86.6k tokens/s)
    L13-H56  seq 128 batch 16    13 MFLOP   1.27x  (13.6k vs 10.7k)
    L4-H104  seq 128 batch 16    44 MFLOP   1.57x  (23.9k vs 15.2k)
    L2-H144  seq 128 batch 16    85 MFLOP   1.20x  (28.2k vs 23.5k)
    L8-H256  seq 128 batch 32   537 MFLOP   1.10x  (3557 vs 3233)
    L8-H512  seq 256 batch 16  2147 MFLOP   1.08x  (925 vs 854)
One thread per run won at every size measured, most for the smallest (a thread pool's fork-join
per op costs more than it saves on small matmuls). So a training run whose block matmul is below
`ONE_THREAD_BELOW_FLOP` (twice the largest measured) gets 1 thread and the cores run that many at
once; a larger one gets all the cores, one run at a time, as before (not measured, so not guessed).
A benchmark job gets all the cores and runs alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import read_json
from depthwidth.machine.processes import available_cores  # noqa: F401 (re-exported: how runs share the cores)

#: block-matmul FLOPs (2 x tokens per step x d_model^2) below which a run trains on one thread
ONE_THREAD_BELOW_FLOP = 4e9
RUN_FILE = "run.json"  # what the trainer writes in a run's folder (depthwidth.artifact.checkpoint.RUN)


def block_matmul_flop(config: dict) -> float:
    """2 x tokens per step x d_model^2 of a stored run's config (`run_config`): a bench job times
    batch-1 steps, one token's worth per position, so it counts its shape's width alone."""
    d_model = int(config["shape"]["d_model"])
    train = config.get("train")
    if not train:
        return 2.0 * d_model**2
    return 2.0 * int(train["seq_len"]) * int(train["batch_size"]) * d_model**2


def run_threads(config: dict, *, cores: int, fixed: int | None = None) -> int:
    """Torch threads of one run: `fixed` (execution.threads) if set; a training run whose block matmul
    is below ONE_THREAD_BELOW_FLOP gets 1 thread, any other run all the `cores` (module docstring).
    A benchmark job gets all the cores: it runs alone."""
    if fixed:
        return fixed
    if config.get("kind") == "train" and block_matmul_flop(config) < ONE_THREAD_BELOW_FLOP:
        return 1
    return max(1, cores)


def default_workers(threads: Iterable[int], *, cores: int) -> int:
    """Worker processes for runs of these thread counts: as many runs of the fewest threads as the
    cores hold (at least 1, at most one per run)."""
    counts = list(threads)
    if not counts:
        return 1
    return max(1, min(len(counts), cores // max(1, min(counts))))


def recorded_threads(run_dir: str | os.PathLike) -> int | None:
    """The thread count a started training run recorded in its folder (run.json), else None."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return None
    try:
        value = read_json(path, what="run description")["config"]["threads"]
    except (UserError, OSError, KeyError, TypeError):  # unreadable: the run starts with the chosen count
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


__all__ = ["ONE_THREAD_BELOW_FLOP", "available_cores", "block_matmul_flop", "default_workers", "recorded_threads",
           "run_threads"]
