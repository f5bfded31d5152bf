"""The refusal of a dtype the device only emulates: training or benchmarking in it is refused with one
line that says how much slower it runs here and which dtype to use, unless asked for explicitly
(`allow_slow_dtype` / `--allow-slow-dtype`).

Whether a dtype may be emulated comes from the capabilities (`device.capabilities`: CPU flags, CUDA
compute capability); how much slower it is comes from two probe GEMMs (`measure.probe_gemm`, n=128:
tens of milliseconds even when emulated), timed only for a dtype the capabilities do not list as
native. A dtype is refused when its probe runs at least `measure.EMULATED_SLOWDOWN` times slower than
fp32's (a CPU whose flags this module does not know, but which computes the dtype fast, is not refused).
"""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError
from depthwidth.machine.device import BF16_CPU_FLAGS, CUDA_NATIVE_FROM, DeviceCapabilities, capabilities

ALLOW = "allow_slow_dtype=true (--allow-slow-dtype)"


def _why(caps: DeviceCapabilities, dtype: str) -> str:
    if caps.device == "cpu":
        return f"{caps.name} has no {' or '.join(BF16_CPU_FLAGS)}" if dtype == "bf16" else caps.name
    since = CUDA_NATIVE_FROM.get(dtype)
    cc = caps.compute_capability
    have = f"compute capability {cc[0]}.{cc[1]}" if cc else "an unknown compute capability"
    return f"{caps.name} has {have}" + (f", {dtype} is native from {since[0]}.{since[1]}" if since else "")


def slowdown(dtype: str, *, device: Any = "cpu") -> tuple[float, float, float]:
    """(times slower than fp32, the dtype's FLOP/s, fp32's FLOP/s) on the probe GEMM, timed now."""
    from depthwidth.machine.measure import probe_gemm

    slow = probe_gemm(dtype=dtype, device=device).flops_per_s
    fp32 = probe_gemm(dtype="fp32", device=device).flops_per_s
    return fp32 / slow, slow, fp32


def slow_dtype_line(dtype: str, *, device: Any = "cpu", field: str = "dtype", allow: str = ALLOW,
                    caps: DeviceCapabilities | None = None) -> str | None:
    """The one-line refusal of `dtype` on `device` when the device only emulates it; None when native
    (by its capabilities, or by a probe as fast as fp32's within EMULATED_SLOWDOWN)."""
    from depthwidth.machine.measure import EMULATED_SLOWDOWN

    caps = caps or capabilities(device)
    if caps.is_native(dtype):
        return None
    times, slow, fp32 = slowdown(dtype, device=device)
    if times < EMULATED_SLOWDOWN:
        return None
    return (f"{field}={dtype!r} is emulated here ({_why(caps, dtype)}): a GEMM runs {times:.0f}x slower than in "
            f"fp32 ({slow / 1e9:.2f} vs {fp32 / 1e9:.1f} GFLOP/s, n=128 probe); use {field}='fp32', or set "
            f"{allow} to run it anyway")


def check_dtype(dtype: str, *, device: Any = "cpu", allowed: bool = False, field: str = "dtype",
                allow: str = ALLOW) -> None:
    """UserError (`slow_dtype_line`) for a dtype the device only emulates, unless `allowed`."""
    if allowed:
        return
    line = slow_dtype_line(dtype, device=device, field=field, allow=allow)
    if line:
        raise UserError(line)


__all__ = ["ALLOW", "check_dtype", "slow_dtype_line", "slowdown"]
