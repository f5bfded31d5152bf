"""Roofline latency of a `Shape` on a `HardwareSpec`: prefill, decode, forward and a training step.

Per op of `layer_ops` (each matmul, the attention score and value products with the cached keys and
values, norms, the MLP activation, the LM head), after Williams, Waterman and Patterson 2009
("Roofline: an insightful visual performance model"):

    time(op) = max(flops / (peak[dtype] * flops_efficiency),
                   bytes / (mem_bandwidth * bandwidth_efficiency)) + op_overhead_s

summed over ops and layers. `bytes` = (weights + activations read + activations written) x bytes per
element of `dtype`. What this ignores, and which way it errs:
- caches: every op reads its inputs from and writes its outputs to device memory (a CPU with a model
  that fits in its last-level cache runs faster than predicted; a GPU's L2 helps small decode steps);
- fusion beyond fused attention (`attn_impl="fused"`, i.e. SDPA/flash, counts scores, softmax and
  values as one kernel that never writes the score matrix; "eager" counts three ops and the scores'
  traffic);
- residual adds, RoPE, reshapes/copies, the embedding gather, sampling (O(d) per token);
- kernel efficiency falling for small or badly shaped matrices: one `flops_efficiency` for all matmuls
  (small widths are slower than predicted, which is one reason rooflines are optimistic);
- overlap of one op's memory traffic with another's compute, and of launches with execution (CUDA
  graphs remove most of `op_overhead_s`; an eager PyTorch loop pays it in full).

Tensor parallelism (Shoeybi et al. 2019, Megatron-LM): the q/k/v, output, MLP and LM-head matmuls and
attention heads are split over `tp` devices, norms are replicated, and each layer does two all-reduces
of its (tokens x d_model) activations; a ring all-reduce costs 2(t-1)/t x bytes / link bandwidth plus
2(t-1) link latencies (Patarasuk and Yuan 2009). Ignored: overlap of communication with compute,
replicated kv heads when tp > n_kv_heads, gathering vocabulary-parallel logits.
Pipeline parallelism adds, per request, p-1 stage-to-stage sends; it does not shorten one request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Mapping

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.flops import Op, flops, layer_ops
from depthwidth.shapes.hardware import HardwareSpec, dtype_bytes, get_hardware
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape

ATTN_IMPLS = ("fused", "eager")  # "sdpa" and "flash" are read as "fused"
LOGITS = ("all", "last")
KINDS = ("prefill", "decode", "forward", "train_step")

# How tensor parallelism splits each op: (split flops/weights, split reads, split writes).
_TP_SPLIT = {
    "norm1": (False, False, False), "norm2": (False, False, False), "final_norm": (False, False, False),
    "qkv": (True, False, True), "attn_scores": (True, True, True), "attn_softmax": (True, True, True),
    "attn_values": (True, True, True), "attention": (True, True, True), "attn_out": (True, True, False),
    "mlp_up": (True, False, True), "mlp_act": (True, True, True), "mlp_down": (True, True, False),
    "lm_head": (True, False, True),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyBreakdown:
    """Predicted seconds of one call, by op and by what bounds it.

    Fields:
        kind: "prefill" | "decode" (one step: one new token for each of `batch` sequences) | "forward" |
            "train_step".
        hardware, dtype: what it was predicted for.
        batch: sequences per call; tokens: tokens processed per call (decode: batch).
        total_s: seconds of the whole call.
        by_op: seconds per op name over all layers (roofline + fixed cost), communication included.
        compute_bound_s / memory_bound_s: roofline seconds of ops whose FLOP / byte term dominates.
        overhead_s: fixed per-op costs; comm_s: communication seconds; bubble_s: pipeline idle time.
        flops, bytes: per device per call.
    """

    kind: str
    hardware: str
    dtype: str
    batch: int
    tokens: int
    total_s: float
    by_op: Mapping[str, float]
    compute_bound_s: float
    memory_bound_s: float
    overhead_s: float
    comm_s: float
    bubble_s: float
    flops: float
    bytes: float

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, KINDS)
        for name in ("total_s", "compute_bound_s", "memory_bound_s", "overhead_s", "comm_s", "bubble_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise UserError(f"{name}={value!r} must be >= 0")
        object.__setattr__(self, "by_op", MappingProxyType(dict(self.by_op)))

    @property
    def compute_bound_share(self) -> float:
        """Share of the roofline time (overhead and communication excluded) spent in compute-bound ops."""
        roof = self.compute_bound_s + self.memory_bound_s
        return self.compute_bound_s / roof if roof else 0.0

    @property
    def memory_bound_share(self) -> float:
        roof = self.compute_bound_s + self.memory_bound_s
        return self.memory_bound_s / roof if roof else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.total_s if self.total_s else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "hardware": self.hardware,
            "dtype": self.dtype,
            "batch": self.batch,
            "tokens": self.tokens,
            "total_s": self.total_s,
            "total_ms": self.total_s * 1e3,
            "tokens_per_s": self.tokens_per_s,
            "compute_bound_s": self.compute_bound_s,
            "memory_bound_s": self.memory_bound_s,
            "compute_bound_share": self.compute_bound_share,
            "memory_bound_share": self.memory_bound_share,
            "overhead_s": self.overhead_s,
            "comm_s": self.comm_s,
            "bubble_s": self.bubble_s,
            "flops": self.flops,
            "bytes": self.bytes,
            "by_op": dict(self.by_op),
        }


def _hw(hardware: HardwareSpec | str) -> HardwareSpec:
    return hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)


def ring_allreduce_s(*, nbytes: float, ranks: int, hardware: HardwareSpec) -> float:
    """Seconds of one ring all-reduce of `nbytes` over `ranks` devices (Patarasuk and Yuan 2009):
    2(r-1) steps, each moving nbytes/r over one link: 2(r-1)/r x nbytes / bandwidth + 2(r-1) x latency.
    Ignores tree/NVLS algorithms (faster for small messages) and contention across nodes."""
    check_int("ranks", ranks)
    if ranks == 1:
        return 0.0
    if hardware.link_bandwidth <= 0:
        raise UserError(f"hardware {hardware.name!r} has no device-to-device link; parallel degree must be 1")
    bw = hardware.link_bandwidth * hardware.link_efficiency
    return 2 * (ranks - 1) / ranks * nbytes / bw + 2 * (ranks - 1) * hardware.link_latency_s


def p2p_send_s(*, nbytes: float, hardware: HardwareSpec) -> float:
    """Seconds of one point-to-point send of `nbytes` between pipeline stages."""
    if hardware.link_bandwidth <= 0:
        raise UserError(f"hardware {hardware.name!r} has no device-to-device link; pp must be 1")
    return nbytes / (hardware.link_bandwidth * hardware.link_efficiency) + hardware.link_latency_s


def _fuse_attention(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """Scores, softmax and values as one fused kernel (FlashAttention, Dao et al. 2022; PyTorch sdpa):
    the score matrix never goes to memory; q, k, v are read once and the output written once."""
    by_name = {op.name: op for op in ops}
    scores, values = by_name["attn_scores"], by_name["attn_values"]
    q_read = by_name["attn_out"].read_elems  # (tokens x q_dim), the size of q and of the output
    kv_read = scores.read_elems - q_read  # cached + new keys; values are as many
    fused = Op(name="attention", kind="matmul", flops=scores.flops + values.flops, weight_elems=0,
               read_elems=q_read + 2 * kv_read, write_elems=q_read, repeat=scores.repeat)
    out: list[Op] = []
    for op in ops:
        if op.name == "attn_scores":
            out.append(fused)
        elif op.name not in ("attn_softmax", "attn_values"):
            out.append(op)
    return tuple(out)


def _last_token_head(ops: tuple[Op, ...], *, new_tokens: int) -> tuple[Op, ...]:
    """Only the last position's logits (what a server needs after prefill)."""
    return tuple(
        replace(op, flops=op.flops / new_tokens, read_elems=op.read_elems / new_tokens,
                write_elems=op.write_elems / new_tokens) if op.name == "lm_head" else op
        for op in ops
    )


def _roofline(
    shape: Shape, *, kind: str, hardware: HardwareSpec | str, batch: int, new_tokens: int, past_tokens: int,
    dtype: str, tp: int, pp: int, attn_impl: str, logits: str,
) -> LatencyBreakdown:
    hw = _hw(hardware)
    for name, value in (("batch", batch), ("tp", tp), ("pp", pp)):
        check_int(name, value)
    attn_impl = "fused" if attn_impl in ("sdpa", "flash") else attn_impl
    check_choice("attn_impl", attn_impl, ATTN_IMPLS)
    check_choice("logits", logits, LOGITS)
    if pp > shape.n_layers:
        raise UserError(f"pp={pp} exceeds n_layers={shape.n_layers}; each pipeline stage needs a layer")
    size = dtype_bytes(dtype)
    peak = hw.achievable_flops(dtype)
    bandwidth = hw.achievable_bandwidth
    attention = "causal" if shape.causal else "full"
    ops = layer_ops(shape, batch=batch, new_tokens=new_tokens, past_tokens=past_tokens, attention=attention)
    if attn_impl == "fused":
        ops = _fuse_attention(ops)
    if logits == "last":
        ops = _last_token_head(ops, new_tokens=new_tokens)
    by_op: dict[str, float] = {}
    compute_s = memory_s = overhead_s = total_flops = total_bytes = 0.0
    for op in ops:
        split, split_read, split_write = _TP_SPLIT.get(op.name, (False, False, False))
        f = op.flops / tp if split else op.flops
        w = op.weight_elems / tp if split else op.weight_elems
        r = op.read_elems / tp if split_read else op.read_elems
        wr = op.write_elems / tp if split_write else op.write_elems
        nbytes = (w + r + wr) * size
        t_flops, t_bytes = f / peak, nbytes / bandwidth
        roof = max(t_flops, t_bytes) * op.repeat
        fixed = hw.op_overhead_s * op.repeat
        if t_flops >= t_bytes and f > 0:
            compute_s += roof
        else:
            memory_s += roof
        overhead_s += fixed
        by_op[op.name] = roof + fixed
        total_flops += f * op.repeat
        total_bytes += nbytes * op.repeat
    comm_s = 0.0
    n_tokens = batch * new_tokens
    if tp > 1:  # two all-reduces per layer of (tokens x d_model) activations
        per = ring_allreduce_s(nbytes=n_tokens * shape.d_model * size, ranks=tp, hardware=hw) + hw.op_overhead_s
        by_op["tp_allreduce"] = 2 * shape.n_layers * per
        comm_s += by_op["tp_allreduce"]
    if pp > 1:
        by_op["pp_send"] = (pp - 1) * p2p_send_s(nbytes=n_tokens * shape.d_model * size, hardware=hw)
        comm_s += by_op["pp_send"]
    total = compute_s + memory_s + overhead_s + comm_s
    return LatencyBreakdown(
        kind=kind, hardware=hw.name, dtype=dtype, batch=batch, tokens=n_tokens, total_s=total, by_op=by_op,
        compute_bound_s=compute_s, memory_bound_s=memory_s, overhead_s=overhead_s, comm_s=comm_s, bubble_s=0.0,
        flops=total_flops, bytes=total_bytes,
    )


def predict_forward(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, seq_len: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused",
) -> LatencyBreakdown:
    """One no-grad forward over (batch, seq_len) tokens with logits for every position (what
    `depthwidth.model.Transformer.forward` computes for training or evaluation)."""
    check_int("seq_len", seq_len)
    return _roofline(shape, kind="forward", hardware=hardware, batch=batch, new_tokens=seq_len, past_tokens=0,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits="all")


def predict_prefill(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, prompt_len: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused", logits: str = "last",
) -> LatencyBreakdown:
    """Prefill of `batch` prompts of `prompt_len` tokens (time to first token, sampling ignored).
    `logits="last"` computes the LM head for the last position only, as serving engines do;
    "all" for every position, as a plain forward does."""
    check_int("prompt_len", prompt_len)
    return _roofline(shape, kind="prefill", hardware=hardware, batch=batch, new_tokens=prompt_len, past_tokens=0,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits=logits)


def predict_decode(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, context: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused",
) -> LatencyBreakdown:
    """One decode step: one new token for each of `batch` sequences with `context` tokens already in
    the KV cache (seconds per generated token at that batch; tokens/s = batch / total_s).
    At batch 1 every weight is read once per token, so the step is memory-bound and its floor is
    weight bytes / bandwidth; the fixed per-op cost makes deeper shapes slower at equal parameters."""
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise UserError(f"context={context!r} must be an integer >= 0")
    return _roofline(shape, kind="decode", hardware=hardware, batch=batch, new_tokens=1, past_tokens=context,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits="all")


def predict_train_step(
    shape: Shape, *, hardware: HardwareSpec | str, seq_len: int, global_batch: int, micro_batch: int = 1,
    dtype: str = "bf16", mfu: float | None = None, dp: int = 1, tp: int = 1, pp: int = 1,
    recompute: str = "none", grad_bytes: int = 4, dp_overlap: bool = True,
) -> LatencyBreakdown:
    """Seconds of one optimizer step over `global_batch` sequences of `seq_len` tokens on dp*tp*pp devices.

    compute = tokens x hardware training FLOPs per token (`flops(...).hardware_train_per_token`:
              6N + attention, plus recomputation) / (dp*tp*pp) / (peak[dtype] x mfu);
              `mfu` (default hardware.train_mfu) is the utilisation of the math alone: with recompute
              the recomputed FLOPs come on top, so the resulting MFU is lower.
    bubble  = compute x (p-1)/m with m = global_batch / (dp x micro_batch) micro-batches, so the bubble is
              the fraction (p-1)/(m+p-1) of compute + bubble (GPipe, Huang et al. 2019; 1F1B has the same).
    tp_allreduce = 4 ring all-reduces per layer per micro-batch (2 forward, 2 backward; 6 with full
              recompute) of micro_batch x seq_len x d_model activations, fully exposed (Megatron-LM).
    pp_send = 2 sends (activation forward, gradient backward) per micro-batch per stage boundary.
    dp_allreduce = ring all-reduce of this device's gradients (params/(tp*pp) x grad_bytes); with
              `dp_overlap` it hides behind the backward pass of the last micro-batch (PyTorch DDP
              buckets), and only the rest is exposed.
    Ignores: optimizer update time, data loading, ZeRO/FSDP gathers, sequence parallelism, links
    slower than the intra-node one (multi-node jobs), and kernels' efficiency varying with shape.
    """
    hw = _hw(hardware)
    for name, value in (("seq_len", seq_len), ("global_batch", global_batch), ("micro_batch", micro_batch),
                        ("dp", dp), ("tp", tp), ("pp", pp), ("grad_bytes", grad_bytes)):
        check_int(name, value)
    if global_batch % (dp * micro_batch):
        raise UserError(
            f"global_batch={global_batch} is not a multiple of dp x micro_batch = {dp} x {micro_batch}"
        )
    if pp > shape.n_layers:
        raise UserError(f"pp={pp} exceeds n_layers={shape.n_layers}; each pipeline stage needs a layer")
    util = hw.train_mfu if mfu is None else mfu
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise UserError(f"mfu={mfu!r} must be a number in (0, 1]")
    size = dtype_bytes(dtype)
    m = global_batch // (dp * micro_batch)
    tokens = global_batch * seq_len
    fl = flops(shape, seq_len=seq_len, attention="causal", recompute=recompute)
    device_flops = tokens * fl.hardware_train_per_token / (dp * tp * pp)
    compute = device_flops / (hw.peak(dtype) * util)
    bubble = compute * (pp - 1) / m
    by_op = {"compute": compute}
    comm = 0.0
    if tp > 1:
        per_layer = 6 if recompute == "full" else 4
        act = micro_batch * seq_len * shape.d_model * size
        by_op["tp_allreduce"] = m * (shape.n_layers / pp) * per_layer * (
            ring_allreduce_s(nbytes=act, ranks=tp, hardware=hw) + hw.op_overhead_s)
        comm += by_op["tp_allreduce"]
    if pp > 1:
        by_op["pp_send"] = 2 * m * p2p_send_s(nbytes=micro_batch * seq_len * shape.d_model * size, hardware=hw)
        comm += by_op["pp_send"]
    if dp > 1:
        grads = count_params(shape).total / (tp * pp) * grad_bytes
        t_dp = ring_allreduce_s(nbytes=grads, ranks=dp, hardware=hw)
        hidden = (2 / 3) * compute / m if dp_overlap else 0.0
        by_op["dp_allreduce_exposed"] = max(0.0, t_dp - hidden)
        comm += by_op["dp_allreduce_exposed"]
    if bubble:
        by_op["bubble"] = bubble
    return LatencyBreakdown(
        kind="train_step", hardware=hw.name, dtype=dtype, batch=global_batch, tokens=tokens,
        total_s=compute + bubble + comm, by_op=by_op, compute_bound_s=compute, memory_bound_s=0.0,
        overhead_s=0.0, comm_s=comm, bubble_s=bubble, flops=device_flops, bytes=0.0,
    )


def pipeline_bubble_fraction(*, pp: int, micro_batches: int) -> float:
    """(p-1)/(m+p-1): the idle share of a GPipe/1F1B schedule (Huang et al. 2019; Narayanan et al. 2021)."""
    check_int("pp", pp)
    check_int("micro_batches", micro_batches)
    return (pp - 1) / (micro_batches + pp - 1)


__all__ = [
    "LatencyBreakdown", "pipeline_bubble_fraction", "predict_decode", "predict_forward", "predict_prefill",
    "predict_train_step", "p2p_send_s", "ring_allreduce_s",
]
