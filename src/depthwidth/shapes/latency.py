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
attention heads are split over `tp` devices (`TP_SPLIT`), norms are replicated, and each layer does two
all-reduces of its (tokens x d_model) activations; a ring all-reduce costs 2(t-1)/t x bytes / link
bandwidth plus 2(t-1) link latencies (Patarasuk and Yuan 2009; `depthwidth.shapes.comm`). Ignored:
overlap of communication with compute, replicated kv heads when tp > n_kv_heads, gathering
vocabulary-parallel logits. Pipeline parallelism adds, per request, p-1 stage-to-stage sends; it does
not shorten one request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from depthwidth.errors import UserError
from depthwidth.serial import Serializable, hook
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.comm import (
    inference_comm,
    p2p_send_s,  # re-exported
    pipeline_bubble_fraction,  # re-exported
    ring_allreduce_s,  # re-exported
    train_comm,
)
from depthwidth.shapes.flops import Op, flops, layer_ops
from depthwidth.shapes.hardware import HardwareSpec, dtype_bytes, get_hardware
from depthwidth.shapes.ops import (
    ATTENTION,
    ATTN_OUT,
    ATTN_SCORES,
    ATTN_SOFTMAX,
    ATTN_VALUES,
    FINAL_NORM,
    FUSED_ATTENTION_OPS,
    LM_HEAD,
    MLP_ACT,
    MLP_DOWN,
    MLP_UP,
    NORM1,
    NORM2,
    QKV,
    attn_kernel,
)
from depthwidth.shapes.pipeline import bubble_ratio
from depthwidth.shapes.shape import Shape
from depthwidth.shapes.small_ops import EXECUTIONS, KERNEL_OPS, find_curve, fixed_ops, op_cost, op_kernel, train_launch_s

LOGITS = ("all", "last")
KINDS = ("prefill", "decode", "forward", "train_step")

#: How tensor parallelism splits each op of the inventory: (flops and weights, reads, writes) split over
#: tp. Norms are replicated; column-parallel matmuls (qkv, MLP up, LM head) read the whole input and
#: write a shard; row-parallel ones (attention out, MLP down) read a shard and write the whole
#: output before the all-reduce; per-head and per-hidden-unit ops are split throughout.
TP_SPLIT: Mapping[str, tuple[bool, bool, bool]] = MappingProxyType({
    NORM1: (False, False, False), NORM2: (False, False, False), FINAL_NORM: (False, False, False),
    QKV: (True, False, True), ATTN_SCORES: (True, True, True), ATTN_SOFTMAX: (True, True, True),
    ATTN_VALUES: (True, True, True), ATTENTION: (True, True, True), ATTN_OUT: (True, True, False),
    MLP_UP: (True, False, True), MLP_ACT: (True, True, True), MLP_DOWN: (True, True, False),
    LM_HEAD: (True, False, True),
})


def tp_split(name: str) -> tuple[bool, bool, bool]:
    """`TP_SPLIT[name]`; ValueError for an op the latency model does not know (a defect, not a user
    mistake: every name of `depthwidth.shapes.ops.OP_NAMES` has a row)."""
    if name not in TP_SPLIT:
        raise ValueError(f"the latency model does not know op {name!r}; known ops: {', '.join(TP_SPLIT)}")
    return TP_SPLIT[name]


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyBreakdown(Serializable):
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
        execution: "eager" | "compiled" | "graph", the execution the fixed costs assume
            (`depthwidth.shapes.small_ops.EXECUTIONS`).
    The dict form has the derived times and shares right after the fields they follow from.
    """

    kind: str
    hardware: str
    dtype: str
    batch: int
    tokens: int
    total_s: float = field(metadata=hook(followed_by=("total_ms", "tokens_per_s")))
    compute_bound_s: float
    memory_bound_s: float = field(metadata=hook(followed_by=("compute_bound_share", "memory_bound_share")))
    overhead_s: float
    comm_s: float
    bubble_s: float
    flops: float
    bytes: float
    execution: str = "eager"
    by_op: Mapping[str, float]

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, KINDS)
        check_choice("execution", self.execution, EXECUTIONS)
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
    def total_ms(self) -> float:
        return self.total_s * 1e3

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.total_s if self.total_s else float("inf")


def _hw(hardware: HardwareSpec | str) -> HardwareSpec:
    return hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)


def _fuse_attention(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """Scores, softmax and values as one fused kernel (FlashAttention, Dao et al. 2022; PyTorch sdpa):
    the score matrix never goes to memory; q, k, v are read once and the output written once."""
    by_name = {op.name: op for op in ops}
    scores, values = by_name[ATTN_SCORES], by_name[ATTN_VALUES]
    q_read = by_name[ATTN_OUT].read_elems  # (tokens x q_dim), the size of q and of the output
    kv_read = scores.read_elems - q_read  # cached + new keys; values are as many
    fused = Op(name=ATTENTION, kind="matmul", flops=scores.flops + values.flops, weight_elems=0,
               read_elems=q_read + 2 * kv_read, write_elems=q_read, repeat=scores.repeat)
    out: list[Op] = []
    for op in ops:
        if op.name == ATTN_SCORES:
            out.append(fused)
        elif op.name not in FUSED_ATTENTION_OPS:
            out.append(op)
    return tuple(out)


def _last_token_head(ops: tuple[Op, ...], *, new_tokens: int) -> tuple[Op, ...]:
    """Only the last position's logits (what a server needs after prefill)."""
    return tuple(
        replace(op, flops=op.flops / new_tokens, read_elems=op.read_elems / new_tokens,
                write_elems=op.write_elems / new_tokens) if op.name == LM_HEAD else op
        for op in ops
    )


def _check_pp(shape: Shape, pp: int) -> None:
    if pp > shape.n_layers:
        raise UserError(f"pp={pp} exceeds n_layers={shape.n_layers}; each pipeline stage needs a layer")


def _inventory(shape: Shape, *, batch: int, new_tokens: int, past_tokens: int, attn_impl: str,
               logits: str) -> tuple[Op, ...]:
    """The ops of one call as the runtime executes them: `layer_ops`, attention fused or not, the LM
    head over every position or the last one."""
    attention = "causal" if shape.causal else "full"
    ops = layer_ops(shape, batch=batch, new_tokens=new_tokens, past_tokens=past_tokens, attention=attention)
    if attn_impl == "fused":
        ops = _fuse_attention(ops)
    if logits == "last":
        ops = _last_token_head(ops, new_tokens=new_tokens)
    return ops


def _roofline(
    shape: Shape, *, kind: str, hardware: HardwareSpec | str, batch: int, new_tokens: int, past_tokens: int,
    dtype: str, tp: int, pp: int, attn_impl: str, logits: str, execution: str = "eager",
    dispatched_ops: int | None = None,
) -> LatencyBreakdown:
    """The roofline of one call (module docstring), with the measured kernel curves of `hw.op_curves`
    where it has one for an op, and the fixed cost of `dispatched_ops` x `hw.dispatch_overhead_s` when
    both are known (eager only), else `op_overhead_s` per inventory op that keeps a launch under
    `execution` (`depthwidth.shapes.small_ops`)."""
    hw = _hw(hardware)
    for name, value in (("batch", batch), ("tp", tp), ("pp", pp)):
        check_int(name, value)
    check_choice("execution", execution, EXECUTIONS)
    if dispatched_ops is not None:
        check_int("dispatched_ops", dispatched_ops)
    counted = dispatched_ops is not None and hw.dispatch_overhead_s is not None and execution == "eager"
    attn_impl = attn_kernel(attn_impl)
    check_choice("logits", logits, LOGITS)
    _check_pp(shape, pp)
    size = dtype_bytes(dtype)
    peak, bandwidth = hw.achievable_flops(dtype), hw.achievable_bandwidth
    ops = _inventory(shape, batch=batch, new_tokens=new_tokens, past_tokens=past_tokens, attn_impl=attn_impl,
                     logits=logits)
    by_op: dict[str, float] = {}
    compute_s = memory_s = overhead_s = total_flops = total_bytes = 0.0
    for op in ops:
        kernel = op_kernel(op.name, ffn=shape.ffn, norm=shape.norm)
        curve = find_curve(hw.op_curves, kernel, dtype, head_dim=shape.head_dim, rows=batch * new_tokens)
        fixed = 0.0 if counted or not fixed_ops(execution, inventory_op=op.name) else hw.op_overhead_s
        cost = op_cost(op, split=tp_split(op.name), tp=tp, size=size, peak=peak, bandwidth=bandwidth,
                       overhead_s=fixed, curve=curve, in_forward=hw.in_forward(dtype) if execution == "eager" else None)
        if cost.compute_bound:
            compute_s += cost.roof_s
        else:
            memory_s += cost.roof_s
        overhead_s += cost.fixed_s
        by_op[op.name] = cost.roof_s + cost.fixed_s
        total_flops += cost.flops
        total_bytes += cost.bytes
    if counted:
        overhead_s = dispatched_ops * hw.dispatch_overhead_s
        by_op["dispatch"] = overhead_s
    n_tokens = batch * new_tokens
    comm = inference_comm(shape, hardware=hw, n_tokens=n_tokens, elem_bytes=size, tp=tp, pp=pp)
    by_op.update(comm)
    comm_s = sum(comm.values(), 0.0)
    total = compute_s + memory_s + overhead_s + comm_s
    return LatencyBreakdown(
        kind=kind, hardware=hw.name, dtype=dtype, batch=batch, tokens=n_tokens, total_s=total, by_op=by_op,
        compute_bound_s=compute_s, memory_bound_s=memory_s, overhead_s=overhead_s, comm_s=comm_s, bubble_s=0.0,
        flops=total_flops, bytes=total_bytes, execution=execution,
    )


def predict_forward(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, seq_len: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused", execution: str = "eager", dispatched_ops: int | None = None,
) -> LatencyBreakdown:
    """One no-grad forward over (batch, seq_len) tokens with logits for every position (what
    `depthwidth.model.Transformer.forward` computes for training or evaluation). `execution` and
    `dispatched_ops`: the fixed costs (`_roofline`)."""
    check_int("seq_len", seq_len)
    return _roofline(shape, kind="forward", hardware=hardware, batch=batch, new_tokens=seq_len, past_tokens=0,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits="all", execution=execution,
                     dispatched_ops=dispatched_ops)


def predict_prefill(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, prompt_len: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused", logits: str = "last", execution: str = "eager",
    dispatched_ops: int | None = None,
) -> LatencyBreakdown:
    """Prefill of `batch` prompts of `prompt_len` tokens (time to first token, sampling ignored).
    `logits="last"` computes the LM head for the last position only, as serving engines do;
    "all" for every position, as a plain forward does."""
    check_int("prompt_len", prompt_len)
    return _roofline(shape, kind="prefill", hardware=hardware, batch=batch, new_tokens=prompt_len, past_tokens=0,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits=logits, execution=execution,
                     dispatched_ops=dispatched_ops)


def predict_decode(
    shape: Shape, *, hardware: HardwareSpec | str, batch: int, context: int, dtype: str = "bf16",
    tp: int = 1, pp: int = 1, attn_impl: str = "fused", execution: str = "eager", dispatched_ops: int | None = None,
) -> LatencyBreakdown:
    """One decode step: one new token for each of `batch` sequences with `context` tokens already in
    the KV cache (seconds per generated token at that batch; tokens/s = batch / total_s).
    At batch 1 every weight is read once per token, so the step is memory-bound and its floor is
    weight bytes / bandwidth; the fixed per-op cost makes deeper shapes slower at equal parameters."""
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise UserError(f"context={context!r} must be an integer >= 0")
    return _roofline(shape, kind="decode", hardware=hardware, batch=batch, new_tokens=1, past_tokens=context,
                     dtype=dtype, tp=tp, pp=pp, attn_impl=attn_impl, logits="all", execution=execution,
                     dispatched_ops=dispatched_ops)


def predict_train_step(
    shape: Shape, *, hardware: HardwareSpec | str, seq_len: int, global_batch: int, micro_batch: int = 1,
    dtype: str = "bf16", mfu: float | None = None, dp: int = 1, tp: int = 1, pp: int = 1,
    recompute: str = "none", grad_bytes: int = 4, dp_overlap: bool = True, virtual_stages: int = 1,
    execution: str = "eager",
) -> LatencyBreakdown:
    """Seconds of one optimizer step over `global_batch` sequences of `seq_len` tokens on dp*tp*pp devices.

    compute = tokens x hardware training FLOPs per token (`flops(...).hardware_train_per_token`:
              6N + attention, plus recomputation) / (dp*tp*pp) / (peak[dtype] x mfu);
              `mfu` (default hardware.train_mfu) is the utilisation of the math alone: with recompute
              the recomputed FLOPs come on top, so the resulting MFU is lower.
    bubble  = compute x (p-1)/(V x m) with m = global_batch / (dp x micro_batch) micro-batches and V =
              virtual_stages (1: GPipe/1F1B, Huang et al. 2019; > 1: interleaved 1F1B, Narayanan et al.
              2021), `depthwidth.shapes.pipeline.bubble_ratio`; with V = 1 the fraction (p-1)/(m+p-1)
              of compute + bubble.
    tp_allreduce = 4 ring all-reduces per layer per micro-batch (2 forward, 2 backward; 6 with full
              recompute) of micro_batch x seq_len x d_model activations, fully exposed (Megatron-LM).
    pp_send = 2 sends (activation forward, gradient backward) per micro-batch per stage boundary.
    dp_allreduce = ring all-reduce of this device's gradients (params/(tp*pp) x grad_bytes); with
              `dp_overlap` it hides behind the backward pass of the last micro-batch (PyTorch DDP
              buckets), and only the rest is exposed.
    launch  = the fixed op cost (`small_ops.train_launch_s`: hardware.op_overhead_s per inventory op of
              this device's layers, x3 for forward and backward, per micro-batch, plus the optimizer's;
              "compiled" keeps the matmul and attention kernels, "graph" none). A GPU launches
              asynchronously, so only launch time beyond the compute is exposed; a CPU adds it. This is
              what makes an eager deep-narrow shape slower per token than its FLOPs say.
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
    _check_pp(shape, pp)
    util = hw.train_mfu if mfu is None else mfu
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise UserError(f"mfu={mfu!r} must be a number in (0, 1]")
    size = dtype_bytes(dtype)
    m = global_batch // (dp * micro_batch)
    tokens = global_batch * seq_len
    fl = flops(shape, seq_len=seq_len, attention="causal", recompute=recompute)
    device_flops = tokens * fl.hardware_train_per_token / (dp * tp * pp)
    compute = device_flops / (hw.peak(dtype) * util)
    bubble = compute * bubble_ratio(pp=pp, virtual_stages=virtual_stages, microbatches=m)
    by_op = {"compute": compute}
    act_bytes = micro_batch * seq_len * shape.d_model * size  # one micro-batch's (B, T, d) activations
    comm_by_op = train_comm(shape, hardware=hw, micro_batches=m, act_bytes=act_bytes, compute_s=compute, dp=dp,
                            tp=tp, pp=pp, recompute=recompute, grad_bytes=grad_bytes, dp_overlap=dp_overlap)
    by_op.update(comm_by_op)
    comm = sum(comm_by_op.values(), 0.0)
    if bubble:
        by_op["bubble"] = bubble
    check_choice("execution", execution, EXECUTIONS)
    ops = _inventory(shape, batch=1, new_tokens=1, past_tokens=0, attn_impl="fused", logits="all")
    n_ops = sum(op.repeat for op in ops) / pp
    launch = train_launch_s(round(n_ops), round(sum(op.repeat for op in ops if op.name in KERNEL_OPS) / pp),
                            op_overhead_s=hw.op_overhead_s, execution=execution, micro_batches=m)
    exposed = max(0.0, launch - compute - bubble) if hw.kind == "gpu" else launch
    by_op["launch"] = exposed
    return LatencyBreakdown(
        kind="train_step", hardware=hw.name, dtype=dtype, batch=global_batch, tokens=tokens,
        total_s=compute + bubble + comm + exposed, by_op=by_op, compute_bound_s=compute, memory_bound_s=0.0,
        overhead_s=exposed, comm_s=comm, bubble_s=bubble, flops=device_flops, bytes=0.0, execution=execution,
    )


__all__ = [
    "TP_SPLIT", "LatencyBreakdown", "pipeline_bubble_fraction", "predict_decode", "predict_forward",
    "predict_prefill", "predict_train_step", "p2p_send_s", "ring_allreduce_s", "tp_split",
]
