"""Starting the `nproc` processes of one run from a single call: `train(shape, config)` with nproc > 1
(from `depthwidth train --nproc N`, or a study's job) starts N child processes (`python -m depthwidth.train.rank`),
each one rank of a `gloo` (CPU) or `nccl` (CUDA) group on this machine, and returns rank 0's result.
The children run exactly what `torchrun --nproc-per-node N` would start: `train(...)` with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set (`distributed.join` reads them).

Each child loads the dataset from the token cache (the parent's `load_dataset` filled it) and, unless
`threads` is set, uses cores / nproc threads. A child's UserError comes back as the parent's UserError;
a child that crashes (or is killed) ends the others and raises.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from depthwidth.errors import UserError

ARGS_FILE = "args.json"
ERROR_FILE = "error.txt"
RESULT_FILE = "result.json"


def spawn(shape, config, *, out_dir=None, resume: bool = False):
    """Run `train(shape, config)` in config.nproc local processes; rank 0's TrainResult."""
    from depthwidth.train.distributed import free_port
    from depthwidth.artifact.result import TrainResult

    with tempfile.TemporaryDirectory(prefix="dwlaunch-") as tmp:
        Path(tmp, ARGS_FILE).write_text(json.dumps({
            "shape": shape.to_dict(), "config": config.to_dict(), "resume": resume,
            "out_dir": None if out_dir is None else os.path.abspath(out_dir)}), encoding="utf-8")
        port = str(free_port())
        procs = []
        for rank in range(config.nproc):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(config.nproc), "LOCAL_RANK": str(rank),
                   "LOCAL_WORLD_SIZE": str(config.nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
            procs.append(subprocess.Popen([sys.executable, "-m", "depthwidth.train.rank", tmp], env=env))
        codes = _wait_all(procs)
        error = Path(tmp, ERROR_FILE)
        if error.is_file():
            raise UserError(error.read_text(encoding="utf-8"))
        if any(codes):
            raise RuntimeError(f"a process of the {config.nproc}-process run ended with exit status "
                               f"{next(c for c in codes if c)} (its output is above)")
        return TrainResult.from_dict(json.loads(Path(tmp, RESULT_FILE).read_text(encoding="utf-8")))


def _wait_all(procs: list[subprocess.Popen]) -> list[int]:
    """Wait for every rank; when one fails, end the others (a rank alone waits forever in a collective)."""
    try:
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                return codes
            if any(c for c in codes if c is not None):
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                return [p.wait() for p in procs]
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
