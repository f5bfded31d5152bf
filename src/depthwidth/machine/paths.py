"""Where depthwidth keeps what it measured: the cache folder and the hardware profile files.

- cache folder: `$DEPTHWIDTH_CACHE`, else `~/.cache/depthwidth` (token arrays of `depthwidth.data`
  live there too).
- profile of this machine's CPU: `<cache>/hw-profile.json` with all cores (or no thread count
  given), and a sibling per other thread count, `<cache>/hw-profile-<N>threads.json`, so that a
  1-thread run never replaces the all-core profile (the names earlier versions wrote).
- profile of a GPU: `<cache>/hw-profile-cuda-<name>.json`, one per GPU model (`device_slug` of its
  name, e.g. hw-profile-cuda-nvidia-h100-80gb-hbm3.json; threads do not matter there), so a CUDA
  profile never replaces a CPU one nor one of another GPU model. An earlier version kept a CUDA
  profile in hw-profile.json: it is still read (the reader checks the device and name it holds).
- `$DEPTHWIDTH_HW_PROFILE` names one file that replaces all of these (for reading and for writing).
These are the only places the project names that folder and those files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from depthwidth.errors import UserError

CACHE_ENV = "DEPTHWIDTH_CACHE"
PROFILE_ENV = "DEPTHWIDTH_HW_PROFILE"
DEFAULT_CACHE = "~/.cache/depthwidth"
PROFILE_NAME = "hw-profile.json"
_THREADS_NAME = re.compile(r"hw-profile-(\d+)threads\.json")


def device_slug(name: str) -> str:
    """A file-name form of a device name: lower case, runs of other characters as one '-'."""
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")[:80] or "unknown"


def _is_cuda(device: str | None) -> bool:
    return device is not None and str(device).split(":", 1)[0] == "cuda"


def cache_dir(folder: str | os.PathLike | None = None) -> Path:
    """`folder` when given, else `$DEPTHWIDTH_CACHE`, else `~/.cache/depthwidth` (user-expanded)."""
    root = folder if folder is not None else (os.environ.get(CACHE_ENV) or DEFAULT_CACHE)
    return Path(root).expanduser()


def profile_path(*, threads: int | None = None, cache: str | os.PathLike | None = None,
                 device: str | None = None, device_name: str = "") -> Path:
    """Where the profile measured at `threads` threads is kept: `$DEPTHWIDTH_HW_PROFILE` if set;
    for a CUDA `device`, `<cache>/hw-profile-cuda-<device_slug(device_name)>.json`; else
    `<cache>/hw-profile.json` when `threads` is None or all cores (os.cpu_count()); else
    `<cache>/hw-profile-<threads>threads.json`."""
    override = os.environ.get(PROFILE_ENV)
    if override:
        return Path(override).expanduser()
    root = cache_dir(cache)
    if _is_cuda(device):
        return root / f"hw-profile-cuda-{device_slug(device_name)}.json"
    if threads is None or threads == os.cpu_count():
        return root / PROFILE_NAME
    return root / f"hw-profile-{threads}threads.json"


def profile_candidates(*, threads: int | None = None, cache: str | os.PathLike | None = None,
                       device: str | None = None, device_name: str = "") -> tuple[Path, ...]:
    """The files a profile for `threads` may be in, most specific first: `$DEPTHWIDTH_HW_PROFILE`
    alone if set; for a CUDA `device` its own file then `hw-profile.json` (the older place); else
    `profile_path(threads)` then `hw-profile.json` (which holds a profile of any thread count: its
    `threads` field says which). With `threads` None: `hw-profile.json`, then the per-thread
    siblings, most threads first."""
    if os.environ.get(PROFILE_ENV):
        return (profile_path(),)
    default = cache_dir(cache) / PROFILE_NAME
    if _is_cuda(device):
        return (profile_path(cache=cache, device=device, device_name=device_name), default)
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


def env_seconds(name: str, default: float, *, most: float) -> float:
    """Seconds from the environment variable `name` (`default` when unset or empty): a value that is not a
    number, or not in (0, most), is one UserError naming the variable."""
    text = os.environ.get(name, "")
    try:
        value = float(text) if text else default
    except ValueError:
        raise UserError(f"{name}={text!r} is not a number of seconds") from None
    if not 0 < value < most:
        raise UserError(f"{name}={text!r} must be between 0 and {most:g} seconds")
    return value


__all__ = ["CACHE_ENV", "PROFILE_ENV", "cache_dir", "device_slug", "env_seconds", "profile_candidates",
           "profile_path"]
