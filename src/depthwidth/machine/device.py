"""What the device is and what it computes natively: its name, its CPU flags or CUDA compute
capability, and the dtypes it runs on hardware units (`DeviceCapabilities.native`).

CPU (x86, /proc/cpuinfo flags): fp32 is always native (AVX2 / AVX-512 FMA); bf16 matmuls are native
with AVX512-BF16 (`avx512_bf16`) or AMX (`amx_bf16`); without them torch emulates bf16 through fp32
conversions, measured about 270 times slower than fp32 on an AVX2-only EPYC. fp16 is never used on a
CPU. CUDA (compute capability major.minor): fp32 and fp16 always, tf32 and bf16 from 8.0 (Ampere),
fp8 from 8.9 (Ada, Hopper). A default measurement times only native dtypes (`DeviceCapabilities.dtypes`).
The cpuinfo parsing works on given text (`parse_cpuinfo`) and the CUDA rules on a given capability
(`cuda_capabilities`), so both are testable without the machine; torch is imported only for CUDA.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.shapes.hardware import DTYPES

DEVICE_KINDS = ("cpu", "cuda")
#: the dtypes a hardware profile of a CPU may time (never fp16: about 1 GFLOP/s there)
CPU_PROFILE_DTYPES = ("fp32", "bf16")
#: the dtypes a hardware profile of a CUDA GPU may time (tf32: fp32 storage, TF32 matmuls)
CUDA_PROFILE_DTYPES = ("fp32", "tf32", "bf16", "fp16")
#: /proc/cpuinfo flags that make bf16 matmuls native on x86 CPUs
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
#: the CPU flags a capability line reports (vector width and the matrix units)
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16")
#: CUDA compute capability from which a dtype is native (fp16 and fp32 always)
CUDA_NATIVE_FROM = {"tf32": (8, 0), "bf16": (8, 0), "fp8": (8, 9)}
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
        compute_capability: CUDA (major, minor); None on CPU (or a CUDA device described by name only).
        index: the CUDA device index (0 on CPU).
    """

    device: str
    name: str
    bf16_native: bool
    flags: frozenset[str] = field(default=frozenset(), repr=False)
    compute_capability: tuple[int, int] | None = None
    index: int = 0

    def __post_init__(self) -> None:
        if self.device not in DEVICE_KINDS:
            raise UserError(f"device={self.device!r} is not allowed; expected one of {', '.join(DEVICE_KINDS)}")
        object.__setattr__(self, "flags", frozenset(self.flags))

    @property
    def native(self) -> frozenset[str]:
        """The dtypes this device computes on hardware units (module docstring). A CUDA device known
        by name only (no compute capability) counts tf32 as native exactly when bf16 is (both Ampere)."""
        if self.device == "cpu":
            return frozenset({"fp32", *(("bf16",) if self.bf16_native else ())})
        cc = self.compute_capability
        out = {"fp32", "fp16", *(("bf16",) if self.bf16_native else ())}
        if cc is None:
            return frozenset(out | ({"tf32"} if self.bf16_native else set()))
        return frozenset(out | {d for d, since in CUDA_NATIVE_FROM.items() if tuple(cc) >= since})

    def is_native(self, dtype: str) -> bool:
        return dtype in self.native

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes a default measurement times: CPU fp32 (+ bf16 where native); CUDA fp32, tf32
        (where native), bf16 (where native) and fp16. fp16 is never timed on CPU (about 1 GFLOP/s there)."""
        return tuple(d for d in profile_dtypes(self.device) if d in self.native)

    @property
    def features(self) -> tuple[str, ...]:
        """What makes the dtypes native: CPU flags of CPU_FEATURES present; CUDA `sm_XY`."""
        if self.device == "cpu":
            return tuple(f for f in CPU_FEATURES if f in self.flags)
        cc = self.compute_capability
        return (f"sm_{cc[0]}{cc[1]}",) if cc else ()

    def describe(self) -> str:
        """One line: name, what it has, the native dtypes (what `depthwidth hw measure` prints)."""
        has = ", ".join(self.features) or ("no AVX2" if self.device == "cpu" else "compute capability unknown")
        return f"{self.name} ({self.device}: {has}); native: {', '.join(d for d in DTYPES if d in self.native)}"


def profile_dtypes(kind: str) -> tuple[str, ...]:
    """The dtypes a hardware profile of a device of `kind` ("cpu" or "cuda") may time."""
    return CUDA_PROFILE_DTYPES if kind == "cuda" else CPU_PROFILE_DTYPES


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


def read_cpuinfo(path: Path | None = None) -> CpuInfo:
    """`parse_cpuinfo` of this machine's /proc/cpuinfo (`CPUINFO`, read at call time, so a test may
    point it at another machine's text; empty where there is none, e.g. macOS)."""
    try:
        return parse_cpuinfo(Path(path if path is not None else CPUINFO).read_text())
    except OSError:
        return CpuInfo(model_name="", flags=frozenset())


def cpu_capabilities(info: CpuInfo | None = None) -> DeviceCapabilities:
    """The CPU's capabilities from `info` (default: this machine's /proc/cpuinfo)."""
    info = info if info is not None else read_cpuinfo()
    name = info.model_name or platform.processor() or platform.machine() or "cpu"
    return DeviceCapabilities(device="cpu", name=name, bf16_native=any(f in info.flags for f in BF16_CPU_FLAGS),
                              flags=info.flags)


def cuda_capabilities(name: str, compute_capability: tuple[int, int], *, index: int = 0) -> DeviceCapabilities:
    """The capabilities of a CUDA device of that name and compute capability (module docstring)."""
    cc = (int(compute_capability[0]), int(compute_capability[1]))
    return DeviceCapabilities(device="cuda", name=name, bf16_native=cc >= CUDA_NATIVE_FROM["bf16"],
                              compute_capability=cc, index=index)


#: What a device setting may say, besides "cuda:N" for the N-th GPU.
DEVICE_SETTINGS = ("auto", "cpu", "cuda")


def check_device(device: Any) -> None:
    """`auto`, `cpu`, `cuda` or `cuda:N` (N a GPU index); anything else is a UserError. Pure: no torch."""
    if isinstance(device, str):
        kind, _, index = device.partition(":")
        if device in DEVICE_SETTINGS or (kind == "cuda" and index.isdigit() and str(int(index)) == index):
            return
    raise UserError(f"device={device!r} is not allowed; expected auto, cpu, cuda or cuda:N (N the GPU index)")


def resolve_device(device: str) -> str:
    """The device a setting means on this machine: "auto" is "cuda" when torch sees a GPU, else "cpu";
    "cuda" and "cuda:N" must name a GPU torch sees (`cuda_index`'s one-line UserError otherwise)."""
    check_device(device)
    if device == "cpu":
        return device
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "auto":
        return "cuda" if count else "cpu"
    cuda_index(device, count)
    return device


def cuda_index(device: Any, count: int) -> int:
    """The GPU index of "cuda" (0) or "cuda:N", checked against the `count` GPUs torch sees: a
    UserError naming the device and what exists otherwise."""
    text = str(device)
    kind, _, index = text.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise UserError(f"device={text!r} is not allowed; expected cpu, cuda or cuda:N")
    if count < 1:
        raise UserError(f"device={text!r} but torch sees no CUDA device; use device='cpu' or 'auto'")
    n = int(index) if index else 0
    if n >= count:
        which = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise UserError(f"device={text!r}: there is no GPU {n}; torch sees {count} ({which})")
    return n


def capabilities(device: Any = "cpu") -> DeviceCapabilities:
    """The capabilities of `device` ("cpu", "cuda", "cuda:N" or a torch.device)."""
    if device_kind(device) == "cpu":
        return cpu_capabilities()
    import torch

    index = cuda_index(device, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    return cuda_capabilities(torch.cuda.get_device_name(index), torch.cuda.get_device_capability(index), index=index)


def device_name(device: Any = "cpu") -> str:
    """CPU model name or GPU name of `device` (what a stored profile records as `device_name`)."""
    return capabilities(device).name


__all__ = [
    "BF16_CPU_FLAGS", "CPU_FEATURES", "CPU_PROFILE_DTYPES", "CUDA_NATIVE_FROM", "CUDA_PROFILE_DTYPES", "DEVICE_KINDS",
    "DEVICE_SETTINGS", "CpuInfo", "DeviceCapabilities", "capabilities", "check_device", "cpu_capabilities",
    "cuda_capabilities", "cuda_index", "device_kind", "device_name", "parse_cpuinfo", "profile_dtypes", "read_cpuinfo",
    "resolve_device",
]
