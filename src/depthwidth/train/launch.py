"""Starting the `nproc` processes of one run from a single call: `train(shape, config)` with nproc > 1
(from `depthwidth train --nproc N`, or a study's job) starts N child processes (`python -m depthwidth.train.rank`),
each one rank of a `gloo` (CPU) or `nccl` (CUDA) group on this machine, and returns rank 0's result.
The children run exactly what `torchrun --nproc-per-node N` would start: `train(...)` with RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set (`distributed.join` reads them).

Each child loads the dataset from the token cache (the parent's `load_dataset` filled it) and, unless
`threads` is set, uses cores / nproc threads.

The ranks live and die with their launcher, and one run at a time uses a folder:
- Each rank ends when the launcher ends, even by SIGKILL (`machine.die_with_parent`, given the
  launcher's pid in $DEPTHWIDTH_LAUNCHER_PID), so no rank goes on writing the run folder after it.
- The launcher holds the run folder's lock (`artifact.folder.LOCK`, a `machine.FolderLock`) and passes
  it to its ranks, so the lock lasts until the last of them has ended: a second run or a resume of
  the folder started meanwhile is refused with one line instead of racing them.
- A rank's UserError comes back as the launcher's UserError. A rank that ends otherwise ends the
  others, and the first rank to end is named with how it ended, in one line (UserError), e.g. "rank 1
  of the 2-process run was killed by signal 9 (SIGKILL)"; the others' complaints about the peer they
  lost are not shown. A rank that died of a bug (a Python traceback) keeps it: its output is printed
  and the launcher raises RuntimeError. What the ranks print on stderr is collected and printed once
  they have ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from depthwidth.errors import UserError

ARGS_FILE = "args.json"
ERROR_FILE = "error.txt"
RESULT_FILE = "result.json"
#: the launcher's pid, in each rank's environment (the rank ends when that process ends)
LAUNCHER_ENV = "DEPTHWIDTH_LAUNCHER_PID"
#: how long the others may take to end once one rank has failed, before they are killed (seconds)
STOP_GRACE_S = 5.0


def spawn(shape, config, *, out_dir=None, resume: bool = False):
    """Run `train(shape, config)` in config.nproc local processes; rank 0's TrainResult."""
    from depthwidth.artifact.folder import LOCK
    from depthwidth.artifact.result import TrainResult
    from depthwidth.machine.processes import FolderLock, check_per_core
    from depthwidth.train.distributed import free_port

    check_per_core("nproc", config.nproc, what="processes")  # all of them on this machine
    with contextlib.ExitStack() as stack:
        lock = None
        if out_dir is not None:
            lock = stack.enter_context(FolderLock(out_dir, file=LOCK, what="run"))
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="dwlaunch-"))
        Path(tmp, ARGS_FILE).write_text(json.dumps({
            "shape": shape.to_dict(), "config": config.to_dict(), "resume": resume,
            "out_dir": None if out_dir is None else os.path.abspath(out_dir)}), encoding="utf-8")
        port = str(free_port())
        procs = []
        try:
            for rank in range(config.nproc):
                env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(config.nproc), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(config.nproc), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                       LAUNCHER_ENV: str(os.getpid())}
                with open(_stderr_file(tmp, rank), "wb") as err:
                    procs.append(subprocess.Popen([sys.executable, "-m", "depthwidth.train.rank", tmp], env=env,
                                                  stderr=err, pass_fds=() if lock is None else (lock.fd,)))
            ended = _wait_all(procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        error = Path(tmp, ERROR_FILE)
        if error.is_file():
            raise UserError(error.read_text(encoding="utf-8"))
        failed = [(rank, code) for rank, code in ended if code]
        if failed:
            _raise_failed(tmp, *failed[0], nproc=config.nproc)
        for rank in range(config.nproc):
            _relay(tmp, rank)
        return TrainResult.from_dict(json.loads(Path(tmp, RESULT_FILE).read_text(encoding="utf-8")))


def _stderr_file(tmp: str, rank: int) -> Path:
    return Path(tmp, f"rank{rank}.stderr")


def _relay(tmp: str, rank: int) -> str:
    """Print what rank `rank` wrote on stderr (warnings, a traceback) on ours; return it."""
    text = _stderr_file(tmp, rank).read_text(encoding="utf-8", errors="replace")
    if text:
        sys.stderr.write(text)
        sys.stderr.flush()
    return text


def _raise_failed(tmp: str, rank: int, code: int, *, nproc: int) -> None:
    """The first rank to fail, in one line: a UserError naming the rank and how it ended, or (a Python
    traceback in its output: a bug) its output printed and a RuntimeError."""
    where = f"rank {rank} of the {nproc}-process run"
    if code < 0:
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        raise UserError(f"{where} was killed by signal {-code}{name}; the other ranks were stopped")
    text = _stderr_file(tmp, rank).read_text(encoding="utf-8", errors="replace")
    if "Traceback (most recent call last)" in text:
        _relay(tmp, rank)
        raise RuntimeError(f"{where} ended with exit status {code} (its traceback is above)")
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    raise UserError(f"{where} ended with exit status {code}" + (f": {last[:200]}" if last else "")
                    + "; the other ranks were stopped")


def _wait_all(procs: list[subprocess.Popen]) -> list[tuple[int, int]]:
    """Wait for every rank; when one fails, end the others (a rank alone waits forever in a collective).
    Returns (rank, exit code) in the order the ranks ended (a waiting thread per rank times each end)."""
    ended: list[tuple[int, int]] = []
    done = threading.Condition()

    def waiter(rank: int, proc: subprocess.Popen) -> None:
        code = proc.wait()
        with done:
            ended.append((rank, code))
            done.notify()

    for rank, proc in enumerate(procs):
        threading.Thread(target=waiter, args=(rank, proc), daemon=True, name=f"depthwidth-rank{rank}").start()
    with done:
        while len(ended) < len(procs) and not any(code for _, code in ended):
            done.wait(timeout=1.0)
        if len(ended) < len(procs):  # one failed: stop the others, which cannot go on without it
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            deadline = time.monotonic() + STOP_GRACE_S
            while len(ended) < len(procs) and time.monotonic() < deadline:
                done.wait(timeout=0.1)
            for p in procs:
                if p.poll() is None:
                    p.kill()
            while len(ended) < len(procs):
                done.wait(timeout=0.1)
        return list(ended)
