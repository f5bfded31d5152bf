"""What a roofline misses at small sizes: measured time-against-size curves of the kernels a model
runs, and the fixed cost of each op an eager framework dispatches.

A roofline (`depthwidth.shapes.latency`) prices an op at max(FLOPs / peak, bytes / bandwidth). At the
sizes of batch-1 serving of small models that is several times optimistic on a CPU: a (64 x 56) @
(56 x 168) GEMM runs at a third of the n=2048 peak, a fused attention of 64 tokens over 8-wide heads
at a few GFLOP/s, a tanh GELU of 14k elements takes tens of microseconds, and an eager PyTorch forward
dispatches about three aten ops (views, splits, cache writes, residual adds, dropout) per inventory op,
each with its own fixed cost. Two measured corrections close that gap:

- **Kernel curves** (`OpCurves`, measured by `depthwidth.machine.gemm_curve`): for each kernel
  ("matmul", "gemv", "attention", "gelu", "norm") and dtype, points (work, seconds) timed on a few sizes, with
  the kernel's own fixed call cost (its time at the smallest size) taken out. Attention has one curve
  per head size ("attention@8:fp32", ...; `attention_curve`): a fused CPU attention costs about the
  same per head and score at head sizes 8 and 16, so at equal FLOPs a head of 8 takes twice the time
  of a head of 16 (measured: 64 causal tokens, 9 heads of 8 in 47 us, 8 heads of 16 in 46 us), and a
  curve of one head size priced every other one by FLOPs alone. A matmul of one row (a batch-1
  decode step) has its own "gemv" curve (bf16 on an AMX Xeon: (1 x 80) @ (80 x 320) in 54 us, where
  fp32 takes 10 us and 64 rows of bf16 62 us). `work` is FLOPs for matmul, gemv and attention (2 per multiply-add, causal keys per query as `shapes.flops` counts them) and
  elements written for gelu and norm. Between points the time is interpolated in log-log; beyond the
  largest point at its rate, below the smallest in proportion to work. An op with a curve costs
  max(curve(work), bytes / bandwidth); one without keeps the roofline.
- **In-forward factor** (`in_forward_at`, measured by `depthwidth.bench.hw.in_forward_points`): the
  curves are timed back to back, where each kernel finds its data in the caches of the cores that
  wrote it and the OpenMP team awake; inside an eager forward of many small ops it does not. Reference
  forwards of our model (not the shapes a bench predicts) give, per dtype, points (curve seconds of a
  kernel call, measured / curve seconds); a curve-priced kernel of an eager call is multiplied by the
  factor at its own curve seconds (interpolated in log seconds, the end factors beyond). Measured on
  a 2-core Xeon at 2 threads: about 1.5 for calls of 10-40 us, 1.2 at 250 us, 1.1 at 450 us.
- **Dispatched ops**: the number of aten ops one eager call dispatches (counted on the real module
  with a dispatch-mode counter, `depthwidth.bench.dispatch`), times the measured fixed cost of one
  (`HardwareSpec.dispatch_overhead_s`, timed on a tiny model where nothing else costs). Without a
  count the fixed cost is `op_overhead_s` per inventory op, as before.

Which way it errs: the in-forward factor is a mean over each reference forward's kernels, so a
shape whose kernels differ in size more than the references' do is priced at the mean of its sizes; attention between two measured head sizes
is interpolated in log-log of head size at equal FLOPs, below the smallest at that size's time per
score, above the largest at its time per FLOP. Pure: no torch, no I/O.
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

KERNELS = ("matmul", "gemv", "attention", "gelu", "norm")
#: The execution a prediction assumes (`depthwidth.shapes.latency`): "eager" pays a fixed cost per
#: dispatched op; "compiled" (torch.compile) fuses elementwise ops into generated kernels, so only the
#: matmul and attention kernels keep a launch; "graph" (CUDA graphs) replays every launch at once.
EXECUTIONS = ("eager", "compiled", "graph")
#: inventory ops that keep their own kernel under torch.compile (elementwise ops fuse into them)
KERNEL_OPS = frozenset({QKV, ATTN_OUT, MLP_UP, MLP_DOWN, LM_HEAD, ATTENTION})

#: (work, seconds) points of one kernel, sorted by work
Curve = tuple[tuple[float, float], ...]
#: (curve seconds of one kernel call, in-forward factor) points, sorted by seconds
InForward = tuple[tuple[float, float], ...]
OpCurves = Mapping[str, Curve]


def curve_key(kernel: str, dtype: str, *, head_dim: int | None = None) -> str:
    """"kernel:dtype", or "attention@<head_dim>:dtype" for an attention curve of one head size."""
    return f"{kernel}@{head_dim}:{dtype}" if head_dim is not None else f"{kernel}:{dtype}"


def _split_key(key: str) -> tuple[str, int | None, str] | None:
    """(kernel, head size or None, dtype) of a curve key, None when it is not one."""
    name, _, dtype = key.partition(":")
    kernel, at, size = name.partition("@")
    if kernel not in KERNELS or not dtype:
        return None
    if not at:
        return kernel, None, dtype
    if kernel != "attention" or not size.isdigit() or int(size) < 1:
        return None
    return kernel, int(size), dtype


def check_curves(curves: Any, *, name: str = "op_curves") -> OpCurves:
    """A read-only {"kernel:dtype": ((work, seconds), ...)} sorted by work; UserError naming the entry."""
    if curves is None:
        return MappingProxyType({})
    if not isinstance(curves, Mapping):
        raise UserError(f"{name} must map 'kernel:dtype' to (work, seconds) points, got {type(curves).__name__}")
    out: dict[str, Curve] = {}
    for key, points in curves.items():
        if _split_key(str(key)) is None:
            raise UserError(f"{name}[{key!r}]: expected 'kernel:dtype' with kernel one of {', '.join(KERNELS)}, "
                            "or 'attention@<head size>:dtype'")
        try:
            pts = tuple(sorted((float(w), float(s)) for w, s in points))
        except (TypeError, ValueError):
            raise UserError(f"{name}[{key!r}] must be a list of (work, seconds) pairs") from None
        if not pts or any(not (w > 0 and s >= 0 and math.isfinite(w) and math.isfinite(s)) for w, s in pts):
            raise UserError(f"{name}[{key!r}] needs points with work > 0 and seconds >= 0, got {pts!r}")
        out[str(key)] = pts
    return MappingProxyType(out)


def check_in_forward(factors: Any, *, name: str = "kernel_in_forward") -> Mapping[str, InForward]:
    """A read-only {dtype: ((kernel seconds per call, factor > 0), ...)} sorted by seconds (a bare
    number is one point: that factor at every size); UserError naming the entry."""
    if factors is None:
        return MappingProxyType({})
    if not isinstance(factors, Mapping):
        raise UserError(f"{name} must map a dtype to (seconds per call, factor) points, got {type(factors).__name__}")
    out: dict[str, InForward] = {}
    for dtype, points in factors.items():
        try:
            pts = ((1e-6, float(points)),) if isinstance(points, (int, float)) and not isinstance(points, bool) \
                else tuple(sorted((float(t), float(f)) for t, f in points))
        except (TypeError, ValueError):
            raise UserError(f"{name}[{dtype!r}] must be a list of (seconds per call, factor) pairs") from None
        if not pts or any(not (t > 0 and 0 < f < 100 and math.isfinite(t)) for t, f in pts):
            raise UserError(f"{name}[{dtype!r}] needs points with seconds > 0 and a factor above 0 (1.0: kernels "
                            f"as fast as their curves), got {pts!r}")
        out[str(dtype)] = pts
    return MappingProxyType(out)


def in_forward_at(points: InForward | None, call_s: float) -> float:
    """The in-forward factor of a kernel call whose curve time is `call_s`: interpolated linearly in
    log seconds between the measured points, the end points' factors beyond them; 1.0 without points."""
    if not points:
        return 1.0
    if call_s <= points[0][0]:
        return points[0][1]
    if call_s >= points[-1][0]:
        return points[-1][1]
    for (ta, fa), (tb, fb) in itertools.pairwise(points):
        if ta <= call_s <= tb:
            return fa + (fb - fa) * (math.log(call_s / ta) / math.log(tb / ta) if tb > ta else 0.0)
    return points[-1][1]  # not reached: the points are sorted


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


def attention_curve(curves: OpCurves, dtype: str, *, head_dim: int) -> Curve | None:
    """The attention curve of `dtype` at `head_dim` (FLOPs against seconds): the measured one of that
    head size; between two measured sizes, at each work point the log-log interpolation in head size
    (the larger size's curve read at the smaller one's work points; `machine.gemm_curve` keeps heads x
    head size fixed, so they share them); below the
    smallest, that size's seconds at work scaled by head_dim / smallest (the same scores); above the
    largest, the largest's curve. Without per-head-size curves the plain "attention:dtype" one."""
    sized = sorted((hd, curve) for key, curve in curves.items()
                   if (parts := _split_key(key)) and parts[0] == "attention" and parts[1] and parts[2] == dtype
                   for hd in (parts[1],))
    if not sized:
        return curves.get(curve_key("attention", dtype))
    for hd, curve in sized:
        if hd == head_dim:
            return curve
    if head_dim < sized[0][0]:
        hd0, curve = sized[0]
        return tuple((w * head_dim / hd0, s) for w, s in curve)
    if head_dim > sized[-1][0]:
        return sized[-1][1]
    (ha, ca), (hb, cb) = next((a, b) for a, b in itertools.pairwise(sized) if a[0] < head_dim < b[0])
    f = math.log(head_dim / ha) / math.log(hb / ha)
    points = [(w, sa, curve_seconds(cb, w)) for w, sa in ca]
    return tuple((w, sa * (sb / sa) ** f if sa > 0 and sb > 0 else sa + (sb - sa) * f) for w, sa, sb in points)


def find_curve(curves: OpCurves, kernel: str | None, dtype: str, *, head_dim: int, rows: int = 2) -> Curve | None:
    """The curve that prices `kernel` in `dtype` for a shape of `head_dim`, or None; a matmul of one
    row (`rows` = 1: a batch-1 decode step) takes the "gemv" curve where the profile has one."""
    if kernel is None:
        return None
    if kernel == "matmul" and rows == 1 and curve_key("gemv", dtype) in curves:
        return curves[curve_key("gemv", dtype)]
    if kernel == "attention":
        return attention_curve(curves, dtype, head_dim=head_dim)
    return curves.get(curve_key(kernel, dtype))


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
            overhead_s: float, curve: Curve | None = None, in_forward: InForward | None = None) -> OpCost:
    """max(flops / peak, bytes / bandwidth) x repeat + overhead_s x repeat for one inventory op (a
    `shapes.flops.Op`), split over tp as `split` = (flops and weights, reads, writes) says; with a
    kernel `curve`, max(curve(work) x factor, bytes / bandwidth) instead of the roofline, where factor
    is `in_forward_at(in_forward, curve(work))` (1.0 without points)."""
    s_flops, s_read, s_write = split
    f = op.flops / tp if s_flops else op.flops
    w = op.weight_elems / tp if s_flops else op.weight_elems
    r = op.read_elems / tp if s_read else op.read_elems
    wr = op.write_elems / tp if s_write else op.write_elems
    nbytes = (w + r + wr) * size
    t_bytes = nbytes / bandwidth
    if curve is not None:
        kernel_s = curve_seconds(curve, f if f > 0 else wr)
        kernel_s *= in_forward_at(in_forward, kernel_s)
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


__all__ = ["EXECUTIONS", "KERNELS", "KERNEL_OPS", "OPTIMIZER_OPS", "Curve", "OpCost", "OpCurves", "attention_curve",
           "InForward", "check_curves", "check_in_forward", "curve_key", "in_forward_at", "find_curve", "curve_seconds", "fixed_ops", "op_cost", "op_kernel", "train_launch_s"]
