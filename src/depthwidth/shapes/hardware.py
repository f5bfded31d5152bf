"""`HARDWARE`: accelerators and a generic CPU as plain numbers, one source per row.

Conventions of every row:
- `peak_flops` are vendor *dense* peaks (no 2:4 sparsity), FLOP/s with 2 FLOPs per multiply-add,
  on the matrix units for tf32/bf16/fp16/fp8/int8 (int8 in OP/s); `fp32` is the plain (non-tensor)
  fp32 rate on NVIDIA parts and the fp32 matrix rate on MI300X. Tensor rates assume fp32
  accumulation, which is what training and most inference kernels use.
- `mem_bandwidth` is the datasheet DRAM/HBM bandwidth, bytes/s; `mem_capacity` bytes.
- `link_bandwidth` is the intra-node bandwidth one device can send in one direction, bytes/s
  (NVLink 4: 900 GB/s bidirectional = 450 GB/s each way; PCIe 4.0 x16: 32 GB/s each way).
- Efficiency factors are what a large, well-shaped kernel reaches against the peak; they come from
  public measurements (cited per row) and are replaced by measured values when a profile is used
  (`depthwidth.machine.profile_to_hardware`).
- `op_overhead_s` is a fixed cost per operator: kernel launch plus framework dispatch in an eager
  PyTorch loop (a few microseconds on GPUs). Without it a roofline claims that at batch 1
  equal-parameter shapes decode equally fast whatever their depth, which measurement contradicts.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from depthwidth import serial
from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_choice, shown
from depthwidth.shapes.activations import DTYPE_BYTES as _STORAGE_BYTES
from depthwidth.shapes.small_ops import check_curves, check_in_forward

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
#: bytes per element of each compute dtype: the storage sizes of `activations.DTYPE_BYTES`, plus tf32
#: (a matmul mode on fp32 storage)
DTYPE_BYTES = MappingProxyType({**_STORAGE_BYTES, "tf32": 4})
KINDS = ("gpu", "cpu")

GB = 1e9
GiB = 2**30
T = 1e12


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of `dtype`; ValueError naming the known dtypes otherwise."""
    if dtype not in DTYPE_BYTES:
        raise UserError(f"dtype={dtype!r} is not known; expected one of {', '.join(DTYPES)}")
    return DTYPE_BYTES[dtype]


def _check_fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise UserError(f"{name}={value!r} must be a number in (0, 1]")


def _check_nonneg(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise UserError(f"{name}={value!r} must be a number >= 0")


@dataclass(frozen=True, kw_only=True, slots=True)
class HardwareSpec(serial.Serializable):
    """One device (GPU, or a CPU socket as the process sees it).

    Fields:
        name: short key used on the command line, e.g. "h100-sxm".
        label: human name.
        kind: "gpu" | "cpu".
        peak_flops: dtype -> dense peak FLOP/s (only the dtypes the device supports).
        mem_bandwidth: bytes/s of device memory.
        mem_capacity: bytes of device memory.
        link_bandwidth: bytes/s one device sends in one direction to its peers (0 = no link).
        link_latency_s: fixed seconds per step of a ring collective.
        flops_efficiency: achievable fraction of `peak_flops` for large matmuls.
        bandwidth_efficiency: achievable fraction of `mem_bandwidth` for large copies.
        link_efficiency: achievable fraction of `link_bandwidth` for large all-reduces.
        train_mfu: default model-FLOPs utilisation of a training step (math only, no waiting).
        op_overhead_s: fixed seconds per operator (launch and dispatch).
        source: where the numbers come from.
        op_curves: measured kernel time against size ("kernel:dtype" -> (work, seconds) points,
            `depthwidth.shapes.small_ops`); empty for table rows, which keep the plain roofline.
        dispatch_overhead_s: measured fixed seconds per aten op an eager call dispatches (used when a
            prediction is given the call's dispatched-op count), None when not measured.
        kernel_in_forward: dtype -> (curve seconds of a kernel call, factor) points: how much slower
            the curve-priced kernels run inside an eager forward than their curves (timed back to back)
            say, measured on reference forwards (`depthwidth.bench.hw.in_forward_points`;
            `depthwidth.shapes.small_ops.in_forward_at`); a dtype without points counts 1.0.
    """

    name: str
    label: str
    kind: str
    peak_flops: Mapping[str, float]
    mem_bandwidth: float
    mem_capacity: float
    link_bandwidth: float
    link_latency_s: float = 1e-6
    flops_efficiency: float = 0.7
    bandwidth_efficiency: float = 0.8
    link_efficiency: float = 0.8
    train_mfu: float = 0.4
    op_overhead_s: float = 5e-6
    source: str = field(default="")
    op_curves: Mapping[str, Any] = field(default_factory=dict)
    dispatch_overhead_s: float | None = None
    kernel_in_forward: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError(f"name={self.name!r} must be a non-empty string")
        check_choice("kind", self.kind, KINDS)
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise UserError(f"peak_flops={self.peak_flops!r} must map at least one dtype to FLOP/s")
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPES:
                raise UserError(f"peak_flops has unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UserError(f"peak_flops[{dtype!r}]={value!r} must be a positive number")
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))
        for name in ("mem_bandwidth", "mem_capacity"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UserError(f"{name}={value!r} must be a positive number")
        for name in ("link_bandwidth", "link_latency_s", "op_overhead_s"):
            _check_nonneg(name, getattr(self, name))
        for name in ("flops_efficiency", "bandwidth_efficiency", "link_efficiency", "train_mfu"):
            _check_fraction(name, getattr(self, name))
        if not isinstance(self.source, str) or not self.source.strip():
            raise UserError(f"source={self.source!r} must say where the numbers come from")
        object.__setattr__(self, "op_curves", check_curves(self.op_curves))
        if self.dispatch_overhead_s is not None:
            _check_nonneg("dispatch_overhead_s", self.dispatch_overhead_s)
        object.__setattr__(self, "kernel_in_forward", check_in_forward(self.kernel_in_forward))

    def in_forward(self, dtype: str) -> tuple[tuple[float, float], ...]:
        """The measured in-forward points of `dtype`'s kernels, () when not measured."""
        return self.kernel_in_forward.get(dtype, ())

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for `dtype`; ValueError naming the supported dtypes otherwise."""
        dtype_bytes(dtype)
        if dtype not in self.peak_flops:
            raise UserError(
                f"hardware {self.name!r} has no {dtype} rate; it supports {', '.join(self.peak_flops)}"
            )
        return float(self.peak_flops[dtype])

    def achievable_flops(self, dtype: str) -> float:
        return self.peak(dtype) * self.flops_efficiency

    @property
    def achievable_bandwidth(self) -> float:
        return self.mem_bandwidth * self.bandwidth_efficiency

    def ridge_point(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) above which a kernel is compute-bound (Williams et al. 2009)."""
        return self.achievable_flops(dtype) / self.achievable_bandwidth

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HardwareSpec:
        """The spec of `data` (a `to_dict()`, the generic dict form of depthwidth.serial); UserError naming
        unknown or missing fields."""
        return serial.from_dict(cls, data, what="hardware")


# Efficiencies measured publicly on Hopper: an 8192^3 bf16 matmul through PyTorch runs at 770-800
# TFLOP/s on an H200 (0.8 of 989) and a device-to-device copy at about 4.3 TB/s (0.9 of 4.8).
_HOPPER = dict(flops_efficiency=0.8, bandwidth_efficiency=0.9, link_efficiency=0.8, link_latency_s=1e-6)
# Ampere: cuBLAS bf16 GEMMs reach ~250-280 of 312 TFLOP/s; HBM2e copies ~85-90% (NVIDIA A100 tuning guide).
_AMPERE = dict(flops_efficiency=0.8, bandwidth_efficiency=0.85, link_efficiency=0.8, link_latency_s=1e-6)
_PCIE = dict(link_latency_s=5e-6, link_efficiency=0.8)

_ROWS = (
    HardwareSpec(
        name="h100-sxm", label="NVIDIA H100 SXM5 80GB", kind="gpu",
        peak_flops={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                    "fp8": 1978.9 * T, "int8": 1978.9 * T},
        mem_bandwidth=3.35e12, mem_capacity=80 * GB, link_bandwidth=450 * GB, **_HOPPER,
        source="NVIDIA H100 Tensor Core GPU datasheet (SXM5, dense rates = half the sparse ones); "
               "NVLink 4 900 GB/s bidirectional",
    ),
    HardwareSpec(
        name="h200", label="NVIDIA H200 SXM 141GB", kind="gpu",
        peak_flops={"fp32": 66.9 * T, "tf32": 494.7 * T, "bf16": 989.4 * T, "fp16": 989.4 * T,
                    "fp8": 1978.9 * T, "int8": 1978.9 * T},
        mem_bandwidth=4.8e12, mem_capacity=141 * GB, link_bandwidth=450 * GB, **_HOPPER,
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM; compute as H100 SXM, HBM3e 4.8 TB/s); "
               "NVLink 4 900 GB/s bidirectional",
    ),
    HardwareSpec(
        name="a100-40gb", label="NVIDIA A100 SXM4 40GB", kind="gpu",
        peak_flops={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
        mem_bandwidth=1.555e12, mem_capacity=40 * GB, link_bandwidth=300 * GB, **_AMPERE,
        source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB, HBM2 1555 GB/s); NVLink 3 600 GB/s bidirectional",
    ),
    HardwareSpec(
        name="a100-80gb", label="NVIDIA A100 SXM4 80GB", kind="gpu",
        peak_flops={"fp32": 19.5 * T, "tf32": 156 * T, "bf16": 312 * T, "fp16": 312 * T, "int8": 624 * T},
        mem_bandwidth=2.039e12, mem_capacity=80 * GB, link_bandwidth=300 * GB, **_AMPERE,
        source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB, HBM2e 2039 GB/s); NVLink 3 600 GB/s bidirectional",
    ),
    HardwareSpec(
        name="l4", label="NVIDIA L4 24GB", kind="gpu",
        peak_flops={"fp32": 30.3 * T, "tf32": 60 * T, "bf16": 121 * T, "fp16": 121 * T,
                    "fp8": 242.5 * T, "int8": 242.5 * T},
        mem_bandwidth=300 * GB, mem_capacity=24 * GB, link_bandwidth=32 * GB,
        flops_efficiency=0.7, bandwidth_efficiency=0.85, train_mfu=0.35, **_PCIE,
        source="NVIDIA L4 Tensor Core GPU datasheet (dense = half the starred sparse rates; GDDR6 300 GB/s); "
               "PCIe 4.0 x16, no NVLink",
    ),
    HardwareSpec(
        name="h100-pcie", label="NVIDIA H100 PCIe 80GB", kind="gpu",
        peak_flops={"fp32": 51.2 * T, "tf32": 378 * T, "bf16": 756.5 * T, "fp16": 756.5 * T,
                    "fp8": 1513 * T, "int8": 1513 * T},
        mem_bandwidth=2.0e12, mem_capacity=80 * GB, link_bandwidth=300 * GB, **_HOPPER,
        source="NVIDIA H100 Tensor Core GPU datasheet (PCIe, dense = half the sparse rates; HBM2e 2 TB/s); "
               "NVLink bridge 600 GB/s bidirectional",
    ),
    HardwareSpec(
        name="h100-nvl", label="NVIDIA H100 NVL 94GB", kind="gpu",
        peak_flops={"fp32": 60 * T, "tf32": 417.5 * T, "bf16": 835.5 * T, "fp16": 835.5 * T,
                    "fp8": 1670.5 * T, "int8": 1670.5 * T},
        mem_bandwidth=3.9e12, mem_capacity=94 * GB, link_bandwidth=300 * GB, **_HOPPER,
        source="NVIDIA H100 Tensor Core GPU datasheet (NVL, dense = half the sparse rates; HBM3 3.9 TB/s); "
               "NVLink bridge 600 GB/s bidirectional",
    ),
    HardwareSpec(
        name="l40", label="NVIDIA L40 48GB", kind="gpu",
        peak_flops={"fp32": 90.5 * T, "tf32": 90.5 * T, "bf16": 181.05 * T, "fp16": 181.05 * T,
                    "fp8": 362 * T, "int8": 362 * T},
        mem_bandwidth=864 * GB, mem_capacity=48 * GB, link_bandwidth=32 * GB,
        flops_efficiency=0.7, bandwidth_efficiency=0.85, train_mfu=0.35, **_PCIE,
        source="NVIDIA L40 GPU datasheet (dense = half the starred sparse rates; GDDR6 864 GB/s); "
               "PCIe 4.0 x16, no NVLink",
    ),
    HardwareSpec(
        name="l40s", label="NVIDIA L40S 48GB", kind="gpu",
        peak_flops={"fp32": 91.6 * T, "tf32": 183 * T, "bf16": 362.05 * T, "fp16": 362.05 * T,
                    "fp8": 733 * T, "int8": 733 * T},
        mem_bandwidth=864 * GB, mem_capacity=48 * GB, link_bandwidth=32 * GB,
        flops_efficiency=0.7, bandwidth_efficiency=0.85, train_mfu=0.35, **_PCIE,
        source="NVIDIA L40S GPU datasheet (dense = half the starred sparse rates; GDDR6 864 GB/s); "
               "PCIe 4.0 x16, no NVLink",
    ),
    HardwareSpec(
        name="rtx-4090", label="NVIDIA GeForce RTX 4090 24GB", kind="gpu",
        peak_flops={"fp32": 82.6 * T, "tf32": 82.6 * T, "bf16": 165.2 * T, "fp16": 165.2 * T,
                    "fp8": 330.3 * T, "int8": 660.6 * T},
        mem_bandwidth=1008 * GB, mem_capacity=24 * GB, link_bandwidth=32 * GB,
        flops_efficiency=0.75, bandwidth_efficiency=0.85, train_mfu=0.35, **_PCIE,
        source="NVIDIA Ada Lovelace architecture whitepaper, table of GeForce RTX 4090 (dense, fp32 "
               "accumulate; GDDR6X 1008 GB/s); PCIe 4.0 x16, no NVLink",
    ),
    HardwareSpec(
        name="mi300x", label="AMD Instinct MI300X 192GB", kind="gpu",
        peak_flops={"fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T, "fp16": 1307.4 * T,
                    "fp8": 2614.9 * T, "int8": 2614.9 * T},
        mem_bandwidth=5.3e12, mem_capacity=192 * GB, link_bandwidth=448 * GB,
        flops_efficiency=0.6, bandwidth_efficiency=0.8, link_efficiency=0.7, train_mfu=0.35,
        link_latency_s=2e-6, op_overhead_s=8e-6,
        source="AMD Instinct MI300X data sheet (dense matrix rates; HBM3 5.3 TB/s); Infinity Fabric 7 peer "
               "links x 64 GB/s each way; efficiencies from public GEMM benchmarks (~60% of peak bf16)",
    ),
    HardwareSpec(
        name="cpu", label="Generic CPU (2 cores, AVX-512)", kind="cpu",
        peak_flops={"fp32": 400 * GB, "bf16": 800 * GB},
        mem_bandwidth=20 * GB, mem_capacity=16 * GiB, link_bandwidth=0.0, link_latency_s=0.0,
        flops_efficiency=0.8, bandwidth_efficiency=0.7, link_efficiency=1.0, train_mfu=0.3, op_overhead_s=1e-5,
        source="nominal: 2 cores x 64 fp32 FLOP/cycle (two 512-bit FMA units) x ~3 GHz, bf16 dot products 2x; "
               "one DDR5 channel. Replace with `depthwidth hw measure` for the machine at hand",
    ),
)

HARDWARE: Mapping[str, HardwareSpec] = MappingProxyType({h.name: h for h in _ROWS})
assert len(HARDWARE) == len(_ROWS), "duplicate hardware name"

#: other spellings people use on the command line
ALIASES: Mapping[str, str] = MappingProxyType({
    "h100": "h100-sxm", "h100-sxm5": "h100-sxm", "h200-sxm": "h200", "a100": "a100-80gb",
    "a100-40": "a100-40gb", "a100-80": "a100-80gb", "4090": "rtx-4090", "rtx4090": "rtx-4090",
    "mi300": "mi300x", "h100-pcie5": "h100-pcie", "h100pcie": "h100-pcie", "l40-s": "l40s",
})

#: (pattern on the GPU name torch reports, table row), first match wins; the patterns are exact
#: about the variant: 'L4' is never L40 or L40S, an H100 is SXM only when nothing says PCIe or NVL.
#: Names as torch.cuda.get_device_name reports them, e.g. "NVIDIA H100 80GB HBM3" (SXM5),
#: "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe",
#: "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "AMD Instinct MI300X".
GPU_NAMES: tuple[tuple[str, str], ...] = (
    (r"\bh200\b", "h200"),
    (r"\bh100\b.*\bnvl\b", "h100-nvl"),
    (r"\bh100\b.*\bpcie\b", "h100-pcie"),
    (r"\bh100\b", "h100-sxm"),
    (r"\bl40s\b", "l40s"),
    (r"\bl40\b", "l40"),
    (r"\bl4\b", "l4"),
    (r"\brtx 4090\b", "rtx-4090"),
    (r"\bmi300x\b", "mi300x"),
)


def match_gpu(name: str, *, mem_capacity: float | None = None) -> str | None:
    """The HARDWARE row of a GPU as its driver names it, or None when the table has no row for it
    (a variant the table lacks is None, never a near row). An A100 is told apart by its memory:
    the name's "40GB"/"80GB", else `mem_capacity` (bytes); a PCIe A100 is not in the table."""
    key = " ".join(re.sub(r"[-_]", " ", str(name).lower()).split())
    if re.search(r"\ba100\b", key):
        if "pcie" in key:
            return None
        if re.search(r"\b80\s?gb\b", key):
            return "a100-80gb"
        if re.search(r"\b40\s?gb\b", key):
            return "a100-40gb"
        return None if mem_capacity is None else ("a100-80gb" if mem_capacity > 50e9 else "a100-40gb")
    if re.search(r"\bh200\b.*\bnvl\b", key):
        return None  # the H200 NVL (a PCIe card, lower power and clocks) is not the SXM row
    for pattern, row in GPU_NAMES:
        if re.search(pattern, key):
            return row
    return None


def get_hardware(name: str) -> HardwareSpec:
    """The row called `name` (case, spaces and '_' versus '-' do not matter; aliases such as
    'h100' and 'a100' work). Raises ValueError listing every known name otherwise."""
    if isinstance(name, HardwareSpec):
        return name
    if not isinstance(name, str):
        raise UserError(f"hardware name must be a string, got {shown(name)}")
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = ALIASES.get(key, key)
    if key in HARDWARE:
        return HARDWARE[key]
    close = difflib.get_close_matches(key, list(HARDWARE) + list(ALIASES), n=3, cutoff=0.6) if len(key) < 100 else []
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UserError(f"unknown hardware {shown(name)}{hint} (known: {', '.join(HARDWARE)})")


__all__ = ["DTYPES", "DTYPE_BYTES", "GPU_NAMES", "HARDWARE", "HardwareSpec", "dtype_bytes", "get_hardware",
           "match_gpu"]
