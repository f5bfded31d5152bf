"""Measurements around a training run: the machine's peak FLOP/s (the MFU denominator), bytes saved
for backward, bytes of model and optimizer states, peak resident memory.

Peak FLOP/s, in order of preference: `TrainConfig.peak_flops`; the hardware profile JSON written by
`depthwidth hw measure` (`<cache_dir>/hw-profile.json` or its per-thread-count sibling, its
`peak_flops[dtype]`, used when it was a full run on this device with these threads and this torch);
else a quick GEMM measurement cached in
`<cache_dir>/peak/`, keyed by device name, dtype, threads and torch version. On CPU the GEMM is run
both through `torch.mm` and through oneDNN (`mkldnn_linear` on mkldnn tensors), which reaches about
twice the fp32 rate of the default MKL path on some CPUs; the larger is the peak (MFU is measured
against what the machine can do, not against what the default kernel does).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

GEMM_N = {"cpu": 1024, "cuda": 8192}


@dataclass(frozen=True, kw_only=True, slots=True)
class PeakFlops:
    flops_per_s: float
    source: str  # "config" | "profile:<path>" | "measured:<how>" | "cached:<path>"

    def to_dict(self) -> dict:
        return {"flops_per_s": self.flops_per_s, "source": self.source}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hw_profile_paths(cache_dir: Path, *, threads: int) -> list[Path]:
    """$DEPTHWIDTH_HW_PROFILE; else where `depthwidth hw measure` and `depthwidth bench` keep
    profiles: <cache_dir>/hw-profile.json and its per-thread-count sibling
    <cache_dir>/hw-profile-<threads>threads.json."""
    env = os.environ.get("DEPTHWIDTH_HW_PROFILE")
    if env:
        return [Path(env).expanduser()]
    return [cache_dir / "hw-profile.json", cache_dir / f"hw-profile-{threads}threads.json"]


def _profile_peak(path: Path, *, dtype: str, threads: int, device: torch.device) -> float | None:
    """peak_flops[dtype] of a hardware profile JSON measured on this device, with these threads and
    this torch, by a full (not --quick) run; None otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("quick") or data.get("device") != device.type:
        return None
    if data.get("threads") != threads or data.get("torch_version") != torch.__version__:
        return None
    if data.get("device_name") not in (None, device_name(device)):
        return None
    peaks = data.get("peak_flops")
    value = peaks.get(dtype) if isinstance(peaks, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def measure_gemm_flops(*, dtype: str, device: torch.device, n: int | None = None, reps: int = 5,
                       min_seconds: float = 0.25) -> dict[str, float]:
    """Best FLOP/s of an n x n x n GEMM over at least `reps` runs and `min_seconds`, by path
    ("torch.mm", and "mkldnn_linear" (oneDNN) on CPU): `depthwidth.bench.hw.measure_gemm`, the one GEMM
    measurement of the project (also behind `depthwidth hw measure`). Best-of, because other work on
    the machine only slows it down."""
    from depthwidth.bench.hw import measure_gemm

    results = measure_gemm(dtype=dtype, device=str(device), n=n or GEMM_N[device.type], repeat=reps,
                           min_seconds=min_seconds)
    return {g.path: g.flops_per_s for g in results}


def peak_flops(*, dtype: str, device: torch.device, threads: int, cache_dir: Path,
               override: float | None = None) -> PeakFlops:
    """The MFU denominator (see module docstring)."""
    if override is not None:
        return PeakFlops(flops_per_s=float(override), source="config")
    for profile in hw_profile_paths(cache_dir, threads=threads):
        value = _profile_peak(profile, dtype=dtype, threads=threads, device=device)
        if value is not None:
            return PeakFlops(flops_per_s=value, source=f"profile:{profile}")
    name = device_name(device)
    key = f"{device.type}-{_slug(name)}-{dtype}-t{threads}-torch{torch.__version__}"
    path = cache_dir / "peak" / f"{key}.json"
    try:
        cached = json.loads(path.read_text())
        return PeakFlops(flops_per_s=float(cached["flops_per_s"]), source=f"cached:{path}")
    except (OSError, ValueError, KeyError, TypeError):
        pass
    by_path = measure_gemm_flops(dtype=dtype, device=device)
    best = max(by_path, key=by_path.get)
    record = {"flops_per_s": by_path[best], "by_path": by_path, "device_name": name, "dtype": dtype,
              "threads": threads, "torch": torch.__version__, "gemm_n": GEMM_N[device.type]}
    atomic_write_text(path, json.dumps(record, indent=1))
    return PeakFlops(flops_per_s=by_path[best], source=f"measured:gemm-{best}")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:48] or "device"


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---- memory ------------------------------------------------------------------------------------
class SavedTensorMeter:
    """Counts the distinct storages saved for backward inside `track()` (parameters excluded,
    since they are states, not activations). `peak_bytes` is their total: all of them are alive
    together when the forward pass ends."""

    def __init__(self, params) -> None:
        self._param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self._seen: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._param_ptrs and tensor.device.type != "meta":
            self._seen[ptr] = max(self._seen.get(ptr, 0), storage.nbytes())
        return tensor

    @contextmanager
    def track(self):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            yield self

    @property
    def peak_bytes(self) -> int:
        return sum(self._seen.values())


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and optimizer states, counted from the tensors themselves."""
    total = 0
    for p in model.parameters():
        total += p.numel() * p.element_size()
        if p.grad is not None:
            total += p.grad.numel() * p.grad.element_size()
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                total += value.numel() * value.element_size()
    return total


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (ru_maxrss is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)
