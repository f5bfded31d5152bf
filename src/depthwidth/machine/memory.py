"""Free memory, and a refusal before something that cannot fit is allocated.

A model built from a shape (flags, an untrusted checkpoint's metadata, a study spec) allocates its
weights the moment it is built; a shape that needs more than the machine has free would otherwise
swap the machine to a halt or be killed by the kernel. `check_fits` compares a lower bound of what is
about to be allocated with what is free now and refuses with one line naming both.
"""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError
from depthwidth.machine.device import device_kind

GIB = 1024**3


def available_memory(device: Any = "cpu") -> float:
    """Bytes that can be allocated now: the GPU's free memory, or the machine's available RAM (Linux
    MemAvailable: free pages plus the caches the kernel can drop, as psutil reports it)."""
    if device_kind(device) == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(str(device)))
        return float(free)
    import psutil

    return float(psutil.virtual_memory().available)


def check_fits(nbytes: float, *, what: str, device: Any = "cpu") -> None:
    """UserError when `nbytes` (a lower bound of what `what` is about to allocate) exceeds the memory
    free on `device` now."""
    free = available_memory(device)
    if nbytes > free:
        where = "GPU" if device_kind(device) == "cuda" else "machine"
        raise UserError(f"{what} needs at least {nbytes / GIB:,.1f} GiB, more than the {free / GIB:,.1f} GiB "
                        f"free on this {where}")


__all__ = ["GIB", "available_memory", "check_fits"]
