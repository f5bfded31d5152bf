"""Keeping freed host memory in the process, so that a CPU training step does not fault its pages in again.

PyTorch's CPU allocator is the C library's `malloc`. Under glibc every block above the mmap threshold
(128 KiB at start, raised dynamically only as far as the largest block freed so far) is a fresh `mmap` and
goes back to the system when freed, and the top of the heap is trimmed back as soon as 128 KiB are free. A
training step allocates and frees the same activation and gradient buffers every step, so every step maps
them again and the kernel zeroes each 4 KiB page on first touch: measured on this project's 2-core machine
(torch 2.13, fp32, seq 128, batch 32, `benchmarks/bench_host_memory.py`), 3,000-6,300 minor page faults per
step at L16-H64, L1-H256, L4-H128 and L8-H256, against 8-1,000 with the settings below. In wall clock the
gain is small next to that VM's drift (median ratio per interleaved pair of processes 0.90-1.11, pairs
ranging 0.73-1.37): faulting ~20 MiB costs a few ms of a 150-1,000 ms step.
This is the CPU counterpart of the caching allocator PyTorch uses on CUDA.

`keep_freed_memory()` sets glibc's mmap threshold to its largest value (32 MiB on 64-bit: larger blocks are
still mapped each time) and trimming off up to 2 GiB free (`mallopt`), once per process. It is
process-wide and not undone: a training process keeps its peak host memory until it ends, as a CUDA process keeps its cached
blocks. `DEPTHWIDTH_MALLOC=default` leaves the allocator as it is (and so does any C library but glibc).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

#: glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: the largest mmap threshold glibc accepts on a 64-bit system (DEFAULT_MMAP_THRESHOLD_MAX)
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
#: how much free memory at the top of the heap is kept rather than given back (mallopt takes a C int:
#: 2 GiB, the largest)
TRIM_THRESHOLD = 2**31 - 1
ENV = "DEPTHWIDTH_MALLOC"

_applied: str | None = None


def keep_freed_memory() -> str:
    """Apply the settings once per process; returns what holds now, in words."""
    global _applied
    if _applied is not None:
        return _applied
    if os.environ.get(ENV, "").strip().lower() == "default":
        _applied = f"the C library's defaults ({ENV}=default)"
        return _applied
    libc_name, _ = platform.libc_ver()
    if libc_name != "glibc":
        _applied = f"the C library's defaults (not glibc: {libc_name or 'unknown'})"
        return _applied
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1 and libc.mallopt(M_TRIM_THRESHOLD,
                                                                                 TRIM_THRESHOLD) == 1
    _applied = ("glibc: freed blocks up to 32 MiB kept, no trimming" if ok
                else "the C library's defaults (glibc refused mallopt)")
    return _applied


__all__ = ["ENV", "keep_freed_memory"]
