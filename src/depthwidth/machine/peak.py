"""The machine's peak FLOP/s for a dtype: the denominator of a training run's MFU.

In order of preference:
1. `override` (the run config's `peak_flops`): source "config".
2. a stored profile of this machine (`stored.find_profile`: a full run on this device and device
   name, with these threads and this torch, that has the dtype): its `peak_flops[dtype]`, source
   "profile:<path>".
3. a GEMM timed now (`measure.measure_gemm`, best path: on CPU oneDNN reaches about twice the fp32
   rate of the default MKL path on some CPUs, and MFU is measured against what the machine can do),
   source "measured:gemm-<path>". The result is added to the profile file for these threads (to
   the profile there when it is one of this machine, else as a new GEMM-only profile), so the next
   lookup finds it in step 2. There is no other cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from depthwidth.machine.device import device_kind, device_name
from depthwidth.machine.paths import profile_path
from depthwidth.machine.profile import save_profile, utc_now
from depthwidth.machine.stored import ProfileMatch, find_profile


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakFlops:
    """A peak FLOP/s and where it came from."""

    flops_per_s: float
    source: str  # "config" | "profile:<path>" | "measured:gemm-<path>"

    def to_dict(self) -> dict:
        return {"flops_per_s": self.flops_per_s, "source": self.source}


def peak_flops(*, dtype: str, device: Any = "cpu", threads: int | None = None,
               cache_dir: str | os.PathLike | None = None, override: float | None = None,
               n: int | None = None) -> PeakFlops:
    """The MFU denominator (see module docstring). `device` is "cpu", "cuda[:N]" or a torch.device;
    `threads` defaults to torch's current setting; `n` is the GEMM size when one is timed
    (default `measure.default_gemm_n`)."""
    if override is not None:
        return PeakFlops(flops_per_s=float(override), source="config")
    import torch

    from depthwidth.machine.measure import gemm_profile, measure_gemm

    threads = threads if threads is not None else torch.get_num_threads()
    kind, name = device_kind(device), device_name(device)
    # a CUDA profile is one per GPU model whatever the CPU threads (paths.profile_path)
    machine = ProfileMatch(threads=threads if kind == "cpu" else None, device=kind, device_name=name,
                           torch_version=torch.__version__, full=True)
    found = find_profile(replace(machine, dtypes=(dtype,)), cache=cache_dir)
    if found is not None:
        return PeakFlops(flops_per_s=float(found[1].peak_flops[dtype]), source=f"profile:{found[0]}")
    gemm = measure_gemm(dtype=dtype, device=device, n=n, repeat=5, min_seconds=0.25)
    same_machine = find_profile(machine, cache=cache_dir)
    target = profile_path(threads=threads, cache=cache_dir, device=kind, device_name=name)
    if same_machine is not None and same_machine[0] == target:
        profile = same_machine[1].with_gemm(gemm, created=utc_now())
    else:
        profile = gemm_profile(gemm, device=device, threads=threads)
    save_profile(profile, target)
    best = max(gemm, key=lambda g: g.flops_per_s)
    return PeakFlops(flops_per_s=best.flops_per_s, source=f"measured:gemm-{best.path}")


__all__ = ["PeakFlops", "peak_flops"]
