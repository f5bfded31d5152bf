"""Where depthwidth keeps what it measured: the cache folder and the hardware profile files.

- cache folder: `$DEPTHWIDTH_CACHE`, else `~/.cache/depthwidth` (token arrays of `depthwidth.data`
  live there too).
- profile of this machine: `<cache>/hw-profile.json` with all cores (or no thread count given), and
  a sibling per other thread count, `<cache>/hw-profile-<N>threads.json`, so that a 1-thread run
  never replaces the all-core profile. `$DEPTHWIDTH_HW_PROFILE` names one file that replaces all
  of these (for reading and for writing).
These are the only places the project names that folder and those files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

CACHE_ENV = "DEPTHWIDTH_CACHE"
PROFILE_ENV = "DEPTHWIDTH_HW_PROFILE"
DEFAULT_CACHE = "~/.cache/depthwidth"
PROFILE_NAME = "hw-profile.json"
_THREADS_NAME = re.compile(r"hw-profile-(\d+)threads\.json")


def cache_dir(folder: str | os.PathLike | None = None) -> Path:
    """`folder` when given, else `$DEPTHWIDTH_CACHE`, else `~/.cache/depthwidth` (user-expanded)."""
    root = folder if folder is not None else (os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    return Path(root).expanduser()


def profile_path(*, threads: int | None = None, cache: str | os.PathLike | None = None) -> Path:
    """Where the profile measured at `threads` threads is kept: `$DEPTHWIDTH_HW_PROFILE` if set;
    else `<cache>/hw-profile.json` when `threads` is None or all cores (os.cpu_count()); else
    `<cache>/hw-profile-<threads>threads.json`."""
    override = os.environ.get(PROFILE_ENV)
    if override:
        return Path(override).expanduser()
    root = cache_dir(cache)
    if threads is None or threads == os.cpu_count():
        return root / PROFILE_NAME
    return root / f"hw-profile-{threads}threads.json"


def profile_candidates(*, threads: int | None = None, cache: str | os.PathLike | None = None) -> tuple[Path, ...]:
    """The files a profile for `threads` may be in, most specific first: `$DEPTHWIDTH_HW_PROFILE`
    alone if set; else `profile_path(threads)` then `hw-profile.json` (which holds a profile of any
    thread count: its `threads` field says which). With `threads` None: `hw-profile.json`, then the
    per-thread siblings, most threads first."""
    if os.environ.get(PROFILE_ENV):
        return (profile_path(),)
    default = cache_dir(cache) / PROFILE_NAME
    if threads is not None:
        specific = profile_path(threads=threads, cache=cache)
        return (specific,) if specific == default else (specific, default)
    root = cache_dir(cache)
    siblings = []
    if root.is_dir():
        for path in root.iterdir():
            match = _THREADS_NAME.fullmatch(path.name)
            if match:
                siblings.append((int(match.group(1)), path))
    return (default, *(p for _, p in sorted(siblings, reverse=True)))


__all__ = ["CACHE_ENV", "PROFILE_ENV", "cache_dir", "profile_candidates", "profile_path"]
