"""The stored form of a measured machine: `HardwareProfile` (GEMM peaks per dtype and path, copy
bandwidth, fixed cost per op), kept as JSON with one atomic write, and its conversion to the pure
`depthwidth.shapes.hardware.HardwareSpec` that the roofline and the planner use. No torch here:
reading a profile never imports it (the measurement is `depthwidth.machine.measure`).

A dtype the device only emulates (`device.DeviceCapabilities.native`) is timed on a small probe GEMM
only; its probe row is its peak and `emulated[dtype]` says how many times slower than fp32 it ran.
Fields a later version adds are ignored when read (a newer profile still loads); fields this version
added have defaults (an older profile still loads).

A profile is either complete (what `depthwidth hw measure` writes: GEMMs, copy bandwidth and per-op
cost) or GEMM-only (`copy_bandwidth` and `op_overhead_s` null: what the MFU peak lookup writes when
it had to time a GEMM itself). Both are the same schema-1 JSON written by earlier versions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from depthwidth.errors import UserError
from depthwidth.files import file_kind, read_json, write_text
from depthwidth.machine.device import DEVICE_KINDS
from depthwidth.shapes.hardware import DTYPES, HARDWARE, HardwareSpec, match_gpu
from depthwidth.shapes.small_ops import check_curves, check_in_forward

SCHEMA = 1
GEMM_PATHS = ("best", "torch.mm", "mkldnn_linear")


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmResult:
    """One timed GEMM path: `flops_per_s` = 2 n^3 / best seconds."""

    dtype: str
    path: str  # "torch.mm" | "mkldnn_linear"
    n: int
    seconds: float
    flops_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "path": self.path, "n": self.n, "seconds": self.seconds,
                "flops_per_s": self.flops_per_s}


def utc_now() -> str:
    """The current UTC time as an ISO string to the second (a profile's `created`)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def best_rates(gemm: Iterable[GemmResult]) -> dict[str, float]:
    """dtype -> the best FLOP/s over its timed paths (the achievable peak)."""
    best: dict[str, float] = {}
    for g in gemm:
        best[g.dtype] = max(best.get(g.dtype, 0.0), g.flops_per_s)
    return best


def _check_positive(name: str, value: Any, *, allow_none: bool = False, low_inclusive: bool = False) -> None:
    if value is None and allow_none:
        return
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and (value >= 0 if low_inclusive else value > 0)
    if not ok:
        what = "a number >= 0" if low_inclusive else "a positive number"
        raise UserError(f"{name}={value!r} must be {what}{' or null' if allow_none else ''}")


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareProfile:
    """What was measured on one machine.

    Fields:
        device: "cpu" | "cuda"; device_name: CPU model or GPU name; threads: torch threads used.
        gemm: every timed GEMM path; peak_flops: dtype -> best FLOP/s over its paths.
        copy_bandwidth: bytes/s (read + written), None in a GEMM-only profile.
        op_overhead_s: fixed seconds per op, None in a GEMM-only profile.
        op_overheads: seconds per call of each tiny op timed (and "eager_block_op" when measured).
        mem_capacity: bytes of device memory; torch_version, created (UTC ISO time), quick.
        emulated: dtype -> times slower than fp32 on the probe GEMM, for each dtype timed that the
            device only emulates (its peak is the probe's rate, never an n=2048 timing).
        op_curves: kernel time against size, "kernel:dtype" -> [[work, seconds], ...]
            (`depthwidth.machine.gemm_curve`, `depthwidth.shapes.small_ops`); empty when not measured.
        kernel_in_forward: dtype -> [[curve seconds of a kernel call, factor], ...]: seconds of those
            kernels inside an eager forward over their curve seconds, measured on reference forwards
            with the curves (`depthwidth.bench.hw.in_forward_points`); empty when not measured.
    """

    device: str
    device_name: str
    threads: int
    gemm: tuple[GemmResult, ...]
    peak_flops: Mapping[str, float]
    copy_bandwidth: float | None
    op_overhead_s: float | None
    op_overheads: Mapping[str, float]
    mem_capacity: float
    torch_version: str
    created: str
    quick: bool = False
    emulated: Mapping[str, float] = field(default_factory=dict)
    op_curves: Mapping[str, Any] = field(default_factory=dict)
    kernel_in_forward: Mapping[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        if self.device not in DEVICE_KINDS:
            raise UserError(f"device={self.device!r} is not allowed; expected cpu or cuda")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise UserError(f"threads={self.threads!r} must be a positive integer")
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise UserError("peak_flops is empty; a profile needs at least one measured dtype")
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPES or isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UserError(f"peak_flops[{dtype!r}]={value!r}: expected a dtype in {DTYPES} and FLOP/s > 0")
        _check_positive("copy_bandwidth", self.copy_bandwidth, allow_none=True)
        _check_positive("op_overhead_s", self.op_overhead_s, allow_none=True, low_inclusive=True)
        _check_positive("mem_capacity", self.mem_capacity)
        object.__setattr__(self, "kernel_in_forward", check_in_forward(self.kernel_in_forward))
        if (self.copy_bandwidth is None) != (self.op_overhead_s is None):
            raise UserError("copy_bandwidth and op_overhead_s are both measured or both null (a GEMM-only profile)")
        if self.schema != SCHEMA:
            raise UserError(f"schema={self.schema!r}: this version reads hardware profiles of schema {SCHEMA}")
        object.__setattr__(self, "gemm", tuple(self.gemm))
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))
        object.__setattr__(self, "op_overheads", MappingProxyType(dict(self.op_overheads)))
        if not isinstance(self.emulated, Mapping) or not all(
                d in DTYPES and not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0
                for d, v in self.emulated.items()):
            raise UserError(f"emulated={dict(self.emulated) if isinstance(self.emulated, Mapping) else self.emulated!r}"
                            ": expected dtype -> slowdown > 0")
        object.__setattr__(self, "emulated", MappingProxyType(dict(self.emulated)))
        object.__setattr__(self, "op_curves", check_curves(self.op_curves, name="op_curves"))

    @property
    def complete(self) -> bool:
        """Has copy bandwidth and per-op cost (not GEMM-only): enough for a `HardwareSpec`."""
        return self.copy_bandwidth is not None

    def path_flops(self, dtype: str, path: str) -> float | None:
        for g in self.gemm:
            if g.dtype == dtype and g.path == path:
                return g.flops_per_s
        return None

    def with_gemm(self, gemm: Iterable[GemmResult], *, created: str) -> HardwareProfile:
        """This profile with `gemm` added (replacing rows of the same dtype and path) and the peaks of
        their dtypes recomputed from all rows."""
        new = tuple(gemm)
        replaced = {(g.dtype, g.path) for g in new}
        rows = tuple(g for g in self.gemm if (g.dtype, g.path) not in replaced) + new
        peaks = {**self.peak_flops, **best_rates(g for g in rows if g.dtype in {n.dtype for n in new})}
        return replace(self, gemm=rows, peak_flops=peaks, created=created)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema, "device": self.device, "device_name": self.device_name,
            "threads": self.threads, "torch_version": self.torch_version, "created": self.created,
            "quick": self.quick, "peak_flops": dict(self.peak_flops), "copy_bandwidth": self.copy_bandwidth,
            "op_overhead_s": self.op_overhead_s, "op_overheads": dict(self.op_overheads),
            "mem_capacity": self.mem_capacity, "gemm": [g.to_dict() for g in self.gemm],
            **({"emulated": dict(self.emulated)} if self.emulated else {}),  # (absent: the layout of before)
            **({"op_curves": {k: [list(p) for p in v] for k, v in self.op_curves.items()}} if self.op_curves else {}),
            **({"kernel_in_forward": {k: [list(p) for p in v] for k, v in self.kernel_in_forward.items()}}
               if self.kernel_in_forward else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HardwareProfile:
        if not isinstance(data, Mapping):
            raise UserError(f"expected a JSON object, got {type(data).__name__}")
        known = set(cls.__dataclass_fields__)
        data = {k: v for k, v in data.items() if k in known}  # a later version's added fields are ignored
        gemm = data.pop("gemm", [])
        if not isinstance(gemm, list) or not all(isinstance(g, Mapping) for g in gemm):
            raise UserError("field 'gemm' must be a list of objects")
        try:
            row_fields = set(GemmResult.__dataclass_fields__)
            results = tuple(GemmResult(**{k: v for k, v in g.items() if k in row_fields}) for g in gemm)
            return cls(gemm=results, **data)
        except TypeError as exc:
            raise UserError(f"missing or unknown field: {exc}") from None


# ---- storage ------------------------------------------------------------------------------------
def save_profile(profile: HardwareProfile, path: str | os.PathLike) -> Path:
    """Write `profile` as JSON to `path` (to a temporary file in the same folder, then renamed: a
    crash never leaves half a file, and two writers never mix their bytes; `depthwidth.files.write_text`)."""
    return write_text(path, json.dumps(profile.to_dict(), indent=2) + "\n")


def load_profile(path: str | os.PathLike) -> HardwareProfile:
    """Read a profile written by `save_profile`, through the checked reader (`files.read_json`: a regular
    file of at most 16 MiB, opened without blocking). FileNotFoundError if absent; UserError naming the
    file and what is wrong if it is a named pipe, a device or a folder, not valid JSON or not a profile."""
    path = Path(path)
    if file_kind(path) == "missing":
        raise FileNotFoundError(f"no hardware profile at {path}; run `depthwidth hw measure` to make one")
    data = read_json(path, what="hardware profile")  # a pipe, a device or a folder: one line naming what it is
    try:
        return HardwareProfile.from_dict(data)
    except UserError as exc:
        raise UserError(f"{path}: not a valid hardware profile: {exc}") from None


# ---- conversion to the pure spec ----------------------------------------------------------------
def _table_row(name: str, capacity: float) -> HardwareSpec | None:
    """The HARDWARE row of a GPU name (`shapes.hardware.match_gpu`: exact about the variant), for the
    numbers a single-device run cannot measure (links)."""
    row = match_gpu(name, mem_capacity=capacity)
    return HARDWARE[row] if row is not None else None


def profile_to_hardware(profile: HardwareProfile, *, gemm_path: str = "best") -> HardwareSpec:
    """A `HardwareSpec` with the measured peaks, copy bandwidth and per-op cost, efficiencies 1.0
    (the measured rates are already achievable ones). `gemm_path="torch.mm"` uses the default
    `torch.mm` rate instead of the best path (what an eager `nn.Linear` gets on CPU fp32).
    Links (not measurable on one device) come from the matching HARDWARE row, else none.
    UserError for a GEMM-only profile (it has no bandwidth to predict with)."""
    if gemm_path not in GEMM_PATHS:
        raise UserError(f"gemm_path={gemm_path!r} is not allowed; expected one of {', '.join(GEMM_PATHS)}")
    if not profile.complete:
        raise UserError(f"the profile of {profile.device_name} ({profile.threads} threads) has GEMM peaks only; "
                        "run `depthwidth hw measure` for its bandwidth and per-op cost")
    peak = dict(profile.peak_flops)
    if gemm_path != "best":
        for dtype in peak:
            rate = profile.path_flops(dtype, gemm_path)
            if rate is not None:
                peak[dtype] = rate
    row = _table_row(profile.device_name, profile.mem_capacity) if profile.device == "cuda" else None
    links: dict[str, Any] = {"link_bandwidth": 0.0, "link_latency_s": 0.0, "link_efficiency": 1.0}
    mfu = 0.5  # of the measured GEMM rate; a CPU loop of small matmuls reaches about half of it
    if row is not None:
        links = {"link_bandwidth": row.link_bandwidth, "link_latency_s": row.link_latency_s,
                 "link_efficiency": row.link_efficiency}
        mfu = min(1.0, row.train_mfu / row.flops_efficiency)
    return HardwareSpec(
        name=f"measured-{profile.device}", label=f"{profile.device_name} ({profile.threads} threads, measured)",
        kind="gpu" if profile.device == "cuda" else "cpu", peak_flops=peak,
        mem_bandwidth=profile.copy_bandwidth, mem_capacity=profile.mem_capacity, flops_efficiency=1.0,
        bandwidth_efficiency=1.0, train_mfu=mfu, op_overhead_s=profile.op_overhead_s,
        op_curves=profile.op_curves, dispatch_overhead_s=profile.op_overheads.get("dispatch_op"),
        kernel_in_forward=profile.kernel_in_forward,
        source=f"measured by depthwidth hw measure on {profile.created} (torch {profile.torch_version}, "
               f"{'quick' if profile.quick else 'full'} run)", **links,
    )


__all__ = [
    "GEMM_PATHS", "SCHEMA", "GemmResult", "HardwareProfile", "best_rates",
    "load_profile", "profile_to_hardware", "save_profile", "utc_now",
]
