"""What the device is: its name, its CPU flags and whether it computes bf16 natively.

On a CPU, bf16 matmuls are native with AVX512-BF16 (`avx512_bf16`) or AMX (`amx_bf16`) in
/proc/cpuinfo's flags; without them torch emulates bf16 through fp32 conversions, about 270 times
slower than fp32, so a default measurement skips bf16 there (`DeviceCapabilities.dtypes`). On CUDA,
`torch.cuda.is_bf16_supported()` decides (Ampere and later). The cpuinfo parsing works on given text
(`parse_cpuinfo`), so it is testable without the machine; torch is imported only for CUDA.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError

DEVICE_KINDS = ("cpu", "cuda")
#: /proc/cpuinfo flags that make bf16 matmuls native on x86 CPUs
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True, kw_only=True, slots=True)
class CpuInfo:
    """The first processor's `model name` and `flags` lines of /proc/cpuinfo ("" and empty if absent)."""

    model_name: str
    flags: frozenset[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceCapabilities:
    """What one device can compute fast.

    Fields:
        device: "cpu" | "cuda".
        name: CPU model name or GPU name.
        bf16_native: bf16 matmuls run on hardware units (CPU: a flag of BF16_CPU_FLAGS; CUDA:
            torch.cuda.is_bf16_supported()); False means emulated, about 270x slower than fp32 on CPU.
        flags: the CPU flags (empty for CUDA).
    """

    device: str
    name: str
    bf16_native: bool
    flags: frozenset[str] = field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        if self.device not in DEVICE_KINDS:
            raise UserError(f"device={self.device!r} is not allowed; expected one of {', '.join(DEVICE_KINDS)}")
        object.__setattr__(self, "flags", frozenset(self.flags))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes a default measurement times: CPU fp32 (+ bf16 where native); CUDA fp32, tf32,
        bf16 (where supported) and fp16. fp16 is never timed on CPU (about 1 GFLOP/s there)."""
        bf16 = ("bf16",) if self.bf16_native else ()
        return ("fp32", *bf16) if self.device == "cpu" else ("fp32", "tf32", *bf16, "fp16")


def device_kind(device: Any) -> str:
    """"cpu" or "cuda" of a device given as "cpu", "cuda", "cuda:N" or a torch.device;
    UserError naming the allowed devices otherwise."""
    kind = str(device).split(":", 1)[0]
    if kind not in DEVICE_KINDS:
        raise UserError(f"device={str(device)!r} is not allowed; expected cpu, cuda or cuda:N")
    return kind


def parse_cpuinfo(text: str) -> CpuInfo:
    """`CpuInfo` of /proc/cpuinfo text: the first `model name` and the first `flags` line."""
    name, flags = "", None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "model name" and not name:
            name = value.strip()
        elif key == "flags" and flags is None:
            flags = frozenset(value.split())
        if name and flags is not None:
            break
    return CpuInfo(model_name=name, flags=flags or frozenset())


def read_cpuinfo(path: Path = CPUINFO) -> CpuInfo:
    """`parse_cpuinfo` of this machine's /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        return parse_cpuinfo(path.read_text())
    except OSError:
        return CpuInfo(model_name="", flags=frozenset())


def cpu_capabilities(info: CpuInfo | None = None) -> DeviceCapabilities:
    """The CPU's capabilities from `info` (default: this machine's /proc/cpuinfo)."""
    info = info if info is not None else read_cpuinfo()
    name = info.model_name or platform.processor() or platform.machine() or "cpu"
    return DeviceCapabilities(device="cpu", name=name, bf16_native=any(f in info.flags for f in BF16_CPU_FLAGS),
                              flags=info.flags)


def capabilities(device: Any = "cpu") -> DeviceCapabilities:
    """The capabilities of `device` ("cpu", "cuda", "cuda:N" or a torch.device)."""
    if device_kind(device) == "cpu":
        return cpu_capabilities()
    import torch

    if not torch.cuda.is_available():
        raise UserError(f"device={str(device)!r} but torch sees no CUDA device")
    index = torch.device(str(device)).index or 0
    return DeviceCapabilities(device="cuda", name=torch.cuda.get_device_name(index),
                              bf16_native=bool(torch.cuda.is_bf16_supported()))


def device_name(device: Any = "cpu") -> str:
    """CPU model name or GPU name of `device` (what a stored profile records as `device_name`)."""
    return capabilities(device).name


__all__ = [
    "BF16_CPU_FLAGS", "DEVICE_KINDS", "CpuInfo", "DeviceCapabilities", "capabilities", "cpu_capabilities",
    "device_kind", "device_name", "parse_cpuinfo", "read_cpuinfo",
]
