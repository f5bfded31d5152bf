"""The processes of this machine: the cores they may use, how many threads or worker processes a run may
ask for here, a child that ends with its parent, and one process at a time in a folder.

- `available_cores`: the affinity mask on Linux, else os.cpu_count().
- `check_per_core`: a thread or worker-process count above `PER_CORE` per available core is refused
  with one line before anything starts. More than that only wait for a core; and a thread pool asked
  for far more threads than the machine can create does not fail cleanly: libgomp (torch's OpenMP
  runtime on Linux) prints "Thread creation failed" and exits the process (status 1), or crashes it
  (SIGSEGV) when the kernel's thread or pid limit is hit part way (measured: 20000 and 40000 threads
  on a 2-core machine with pid_max 32768; 4096 started in 0.8 s). So the bound that a run is checked
  against is the machine's, applied where the threads are set (`depthwidth.machine.torch_threads`, the
  trainer) and by the commands before they start; the stored configs keep a fixed bound that does not
  depend on where they are read (`artifact.config.LIMITS["threads"]`).
- `die_with_parent`: a child process (a study's worker, a rank of a multi-process run) ends when the
  process that started it ends, even by SIGKILL: PR_SET_PDEATHSIG on Linux (the kernel sends SIGKILL
  the moment the parent exits), checked against the parent's pid to close the race of a parent that
  died before the call, and a thread that polls the parent's pid everywhere (a process group alone
  does not cover SIGKILL of the parent, which cannot pass it on).
- `FolderLock`: an exclusive flock on a file in a folder for the life of one process (and of the
  children it passes the descriptor to); a second process is refused with one line naming the pid
  that holds it. The kernel releases the lock when the last holder ends, however it ends.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from depthwidth.errors import UserError

#: threads (or worker processes) per available core that a run may ask for on this machine
PER_CORE = 4
#: how often the watcher of `die_with_parent` looks at its parent (seconds)
PARENT_POLL_S = 0.5
_PR_SET_PDEATHSIG = 1


def available_cores() -> int:
    """The cores this process may run on (its affinity mask on Linux, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def per_core_limit(cores: int | None = None) -> int:
    """The most threads or worker processes a run may ask for here: `PER_CORE` x the available cores."""
    return PER_CORE * max(1, available_cores() if cores is None else cores)


def check_per_core(name: str, value: int | None, *, what: str = "threads", cores: int | None = None) -> None:
    """UserError naming `name` when `value` (None: not set) is above `per_core_limit` of this machine."""
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return  # the type is the caller's check
    cores = available_cores() if cores is None else cores
    limit = per_core_limit(cores)
    if value > limit:
        why = ("more only wait for a core, and a thread pool that cannot start its threads ends the process"
               if what == "threads" else "more only wait for a core, each with a torch runtime of its own")
        raise UserError(f"{name}={value} is above this machine's limit of {limit} {what} ({PER_CORE} per core of "
                        f"its {cores} core(s): {why})")


def die_with_parent(parent: int | None = None) -> None:
    """End this process (exit status 1, or SIGKILL from the kernel) as soon as its parent ends; `parent`
    is the pid it must have (default: the current parent). Call it first thing in the child."""
    parent = os.getppid() if parent is None else parent
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent ended before the call above: no signal will come
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="depthwidth-parent-watch").start()


class FolderLock:
    """Exclusive lock on `folder/file` for the life of one process (POSIX flock). `what` names what the
    folder holds in the refusal ("study", "run"); `fd` may be passed to children (`pass_fds`) so that the
    lock lasts while any of them lives."""

    def __init__(self, folder: str | os.PathLike, *, file: str, what: str = "folder") -> None:
        self.path = Path(folder) / file
        self.what = what
        self.fd: int | None = None

    def __enter__(self) -> FolderLock:
        import fcntl

        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise UserError(f"{self.path.parent} is a file, not a folder for the {self.what}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise UserError(f"{self.path.parent} is being run by another process (pid {other or '?'}); "
                            "wait for it or stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing this process's descriptor releases the flock (children may hold it on)
            self.fd = None


def is_locked(folder: str | os.PathLike, *, file: str) -> bool:
    """Whether a process holds the `FolderLock` of `folder/file` right now."""
    import fcntl

    path = Path(folder) / file
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


__all__ = ["PER_CORE", "FolderLock", "available_cores", "check_per_core", "die_with_parent", "is_locked",
           "per_core_limit"]
