"""What a roofline misses at small sizes: measured time-against-size curves of the kernels a model
runs, and the fixed cost of each op an eager framework dispatches.

A roofline (`depthwidth.shapes.latency`) prices an op at max(FLOPs / peak, bytes / bandwidth). At the
sizes of batch-1 serving of small models that is several times optimistic on a CPU: a (64 x 56) @
(56 x 168) GEMM runs at a third of the n=2048 peak, a fused attention of 64 tokens over 8-wide heads
at a few GFLOP/s, a tanh GELU of 14k elements takes tens of microseconds, and an eager PyTorch forward
dispatches about three aten ops (views, splits, cache writes, residual adds, dropout) per inventory op,
each with its own fixed cost. Two measured corrections close that gap:

- **Kernel curves** (`OpCurves`, measured by `depthwidth.machine.gemm_curve`): for each kernel
  ("matmul", "attention", "gelu", "norm") and dtype, points (work, seconds) timed on a few sizes, with
  the kernel's own fixed call cost (its time at the smallest size) taken out. `work` is FLOPs for
  matmul and attention (2 per multiply-add, causal keys per query as `shapes.flops` counts them) and
  elements written for gelu and norm. Between points the time is interpolated in log-log; beyond the
  largest point at its rate, below the smallest in proportion to work. An op with a curve costs
  max(curve(work), bytes / bandwidth); one without keeps the roofline.
- **Dispatched ops**: the number of aten ops one eager call dispatches (counted on the real module
  with a dispatch-mode counter, `depthwidth.bench.dispatch`), times the measured fixed cost of one
  (`HardwareSpec.dispatch_overhead_s`, timed on a tiny model where nothing else costs). Without a
  count the fixed cost is `op_overhead_s` per inventory op, as before.

Which way it errs: the curves are timed on isolated kernels with warm caches (a real forward's
kernels share the caches, so a large model is slower than predicted); attention is timed with one
head size (8 heads of 16) and interpolated on FLOPs only. Pure: no torch, no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from depthwidth.errors import UserError
from depthwidth.shapes.ops import ATTENTION, ATTN_OUT, FINAL_NORM, LM_HEAD, MLP_ACT, MLP_DOWN, MLP_UP, NORM1, NORM2, QKV

KERNELS = ("matmul", "attention", "gelu", "norm")
#: The execution a prediction assumes (`depthwidth.shapes.latency`): "eager" pays a fixed cost per
#: dispatched op; "compiled" (torch.compile) fuses elementwise ops into generated kernels, so only the
#: matmul and attention kernels keep a launch; "graph" (CUDA graphs) replays every launch at once.
EXECUTIONS = ("eager", "compiled", "graph")
#: inventory ops that keep their own kernel under torch.compile (elementwise ops fuse into them)
KERNEL_OPS = frozenset({QKV, ATTN_OUT, MLP_UP, MLP_DOWN, LM_HEAD, ATTENTION})

#: (work, seconds) points of one kernel, sorted by work
Curve = tuple[tuple[float, float], ...]
OpCurves = Mapping[str, Curve]


def curve_key(kernel: str, dtype: str) -> str:
    return f"{kernel}:{dtype}"


def check_curves(curves: Any, *, name: str = "op_curves") -> OpCurves:
    """A read-only {"kernel:dtype": ((work, seconds), ...)} sorted by work; UserError naming the entry."""
    if curves is None:
        return MappingProxyType({})
    if not isinstance(curves, Mapping):
        raise UserError(f"{name} must map 'kernel:dtype' to (work, seconds) points, got {type(curves).__name__}")
    out: dict[str, Curve] = {}
    for key, points in curves.items():
        kernel, _, dtype = str(key).partition(":")
        if kernel not in KERNELS or not dtype:
            raise UserError(f"{name}[{key!r}]: expected 'kernel:dtype' with kernel one of {', '.join(KERNELS)}")
        try:
            pts = tuple(sorted((float(w), float(s)) for w, s in points))
        except (TypeError, ValueError):
            raise UserError(f"{name}[{key!r}] must be a list of (work, seconds) pairs") from None
        if not pts or any(not (w > 0 and s >= 0 and math.isfinite(w) and math.isfinite(s)) for w, s in pts):
            raise UserError(f"{name}[{key!r}] needs points with work > 0 and seconds >= 0, got {pts!r}")
        out[str(key)] = pts
    return MappingProxyType(out)


def curve_seconds(curve: Curve, work: float) -> float:
    """Seconds of `work` on `curve`: log-log interpolation between points, the largest point's rate
    beyond it, proportional to work below the smallest."""
    if work <= 0:
        return 0.0
    (w0, s0), (wn, sn) = curve[0], curve[-1]
    if work <= w0:
        return s0 * work / w0
    if work >= wn:
        return sn * work / wn
    for (wa, sa), (wb, sb) in itertools.pairwise(curve):
        if wa <= work <= wb:
            if sa <= 0 or sb <= 0:  # linear where a point is zero (a kernel as cheap as its call)
                return sa + (sb - sa) * (work - wa) / (wb - wa)
            f = math.log(work / wa) / math.log(wb / wa)
            return math.exp(math.log(sa) + f * math.log(sb / sa))
    return sn * work / wn  # not reached: the points are sorted


def op_kernel(name: str, *, ffn: str, norm: str) -> str | None:
    """The curve kernel of an inventory op, or None when no curve prices it: the matmuls, fused
    attention, the GELU of a "gelu" MLP, and LayerNorm (RMSNorm, ReLU and SwiGLU keep the roofline)."""
    if name in (QKV, ATTN_OUT, MLP_UP, MLP_DOWN, LM_HEAD):
        return "matmul"
    if name == ATTENTION:
        return "attention"
    if name == MLP_ACT and ffn == "gelu":
        return "gelu"
    if name in (NORM1, NORM2, FINAL_NORM) and norm == "layernorm":
        return "norm"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class OpCost:
    """One op on one tp rank, over all its repeats: roofline and fixed seconds, FLOPs and bytes."""

    roof_s: float
    fixed_s: float
    compute_bound: bool
    flops: float
    bytes: float


def op_cost(op: Any, *, split: tuple[bool, bool, bool], tp: int, size: int, peak: float, bandwidth: float,
            overhead_s: float, curve: Curve | None = None) -> OpCost:
    """max(flops / peak, bytes / bandwidth) x repeat + overhead_s x repeat for one inventory op (a
    `shapes.flops.Op`), split over tp as `split` = (flops and weights, reads, writes) says; with a
    kernel `curve`, max(curve(work), bytes / bandwidth) instead of the roofline."""
    s_flops, s_read, s_write = split
    f = op.flops / tp if s_flops else op.flops
    w = op.weight_elems / tp if s_flops else op.weight_elems
    r = op.read_elems / tp if s_read else op.read_elems
    wr = op.write_elems / tp if s_write else op.write_elems
    nbytes = (w + r + wr) * size
    t_bytes = nbytes / bandwidth
    if curve is not None:
        kernel_s = curve_seconds(curve, f if f > 0 else wr)
        t_flops = max(kernel_s, f / peak)
    else:
        t_flops = f / peak
    return OpCost(roof_s=max(t_flops, t_bytes) * op.repeat, fixed_s=overhead_s * op.repeat,
                  compute_bound=t_flops >= t_bytes and (f > 0 or curve is not None), flops=f * op.repeat,
                  bytes=nbytes * op.repeat)


#: fixed-cost ops of one optimizer step (a foreach or fused AdamW: a handful of kernels per group)
OPTIMIZER_OPS = 12


def train_launch_s(n_inventory_ops: int, n_kernel_ops: int, *, op_overhead_s: float, execution: str,
                   micro_batches: int) -> float:
    """Fixed seconds of one training step's op launches: per micro-batch the forward's ops and twice as
    many in the backward (3x), plus the optimizer's; "compiled" keeps the matmul and attention
    kernels only, "graph" none."""
    if execution == "graph":
        return 0.0
    per_pass = n_inventory_ops if execution == "eager" else n_kernel_ops
    return (3 * per_pass * micro_batches + OPTIMIZER_OPS) * op_overhead_s


def fixed_ops(execution: str, *, inventory_op: str) -> bool:
    """Whether `inventory_op` pays a fixed launch cost under `execution` (inventory counting)."""
    if execution == "eager":
        return True
    if execution == "compiled":
        return inventory_op in KERNEL_OPS
    return False


__all__ = ["EXECUTIONS", "KERNELS", "KERNEL_OPS", "OPTIMIZER_OPS", "Curve", "OpCost", "OpCurves", "check_curves",
           "curve_key", "curve_seconds", "fixed_ops", "op_cost", "op_kernel", "train_launch_s"]
