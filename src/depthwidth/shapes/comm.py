"""Communication of parallel training and inference, per call or optimizer step, exposed (not overlapped).

Ring all-reduce of n bytes over r ranks (Patarasuk and Yuan 2009): 2(r-1) steps, each moving n/r over
one link: 2(r-1)/r x n / bandwidth + 2(r-1) x link latency. Point-to-point send: n / bandwidth +
latency. Bandwidths are `link_bandwidth x link_efficiency` of the `HardwareSpec`.

Inference (one call over `n_tokens` tokens): tensor parallelism (Shoeybi et al. 2019, Megatron-LM) does
two all-reduces of the (tokens x d_model) activations per layer, each with one fixed op cost; pipeline
parallelism p-1 stage-to-stage sends of them.

Training (one optimizer step of m micro-batches):
    tp_allreduce = m x (n_layers / pp) x 4 all-reduces (2 forward, 2 backward; 6 with full recompute)
                   of one micro-batch's activations, each with one fixed op cost (Megatron-LM);
    pp_send      = 2 m sends (activation forward, gradient backward) per stage boundary;
    dp_allreduce_exposed = max(0, all-reduce of this device's gradients (params / (tp pp) x grad_bytes)
                   - hidden), hidden = 2/3 of one micro-batch's compute with `dp_overlap` (the backward
                   pass of the last micro-batch, PyTorch DDP buckets), else 0.
Pipeline bubble: (p-1)/(m+p-1) of a GPipe/1F1B schedule (Huang et al. 2019; Narayanan et al. 2021).
Ignored: overlap of tp communication with compute, tree/NVLS all-reduce algorithms (faster for small
messages), contention across nodes, replicated kv heads when tp > n_kv_heads.
"""

from __future__ import annotations

from depthwidth.errors import UserError
from depthwidth.shapes.checks import check_int
from depthwidth.shapes.hardware import HardwareSpec
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape


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


def inference_comm(
    shape: Shape, *, hardware: HardwareSpec, n_tokens: int, elem_bytes: int, tp: int, pp: int,
) -> dict[str, float]:
    """Communication seconds of one call over `n_tokens` tokens with activations of `elem_bytes` per
    element: two all-reduces per layer of (tokens x d_model) with tp > 1, p-1 sends with pp > 1."""
    out: dict[str, float] = {}
    nbytes = n_tokens * shape.d_model * elem_bytes
    if tp > 1:
        per = ring_allreduce_s(nbytes=nbytes, ranks=tp, hardware=hardware) + hardware.op_overhead_s
        out["tp_allreduce"] = 2 * shape.n_layers * per
    if pp > 1:
        out["pp_send"] = (pp - 1) * p2p_send_s(nbytes=nbytes, hardware=hardware)
    return out


def train_comm(
    shape: Shape, *, hardware: HardwareSpec, micro_batches: int, act_bytes: float, compute_s: float, dp: int,
    tp: int, pp: int, recompute: str, grad_bytes: int, dp_overlap: bool,
) -> dict[str, float]:
    """Exposed communication seconds of one optimizer step, by kind (module docstring):
    tp all-reduces of one micro-batch's `act_bytes` activations, pipeline sends, and the part of
    the data-parallel gradient all-reduce the backward pass does not hide."""
    hw, m = hardware, micro_batches
    out: dict[str, float] = {}
    if tp > 1:
        per_layer = 6 if recompute == "full" else 4
        out["tp_allreduce"] = m * (shape.n_layers / pp) * per_layer * (
            ring_allreduce_s(nbytes=act_bytes, ranks=tp, hardware=hw) + hw.op_overhead_s)
    if pp > 1:
        out["pp_send"] = 2 * m * p2p_send_s(nbytes=act_bytes, hardware=hw)
    if dp > 1:
        grads = count_params(shape).total / (tp * pp) * grad_bytes
        t_dp = ring_allreduce_s(nbytes=grads, ranks=dp, hardware=hw)
        hidden = (2 / 3) * compute_s / m if dp_overlap else 0.0
        out["dp_allreduce_exposed"] = max(0.0, t_dp - hidden)
    return out


def pipeline_bubble_fraction(*, pp: int, micro_batches: int) -> float:
    """(p-1)/(m+p-1): the idle share of a GPipe/1F1B schedule (Huang et al. 2019; Narayanan et al. 2021)."""
    check_int("pp", pp)
    check_int("micro_batches", micro_batches)
    return (pp - 1) / (micro_batches + pp - 1)


def pipeline_p2p_bytes(*, tokens: int, d_model: int, elem_bytes: int, pp: int, virtual_stages: int = 1,
                       microbatches: int, tp: int = 1, sp: bool = False) -> dict[str, int]:
    """Point-to-point bytes between pipeline stages in one optimizer step, on one tensor-parallel rank.

    Each micro-batch crosses every boundary between consecutive virtual stages (pp*V - 1 of them; with
    interleaving the chunk boundary from the last device back to the first counts too) twice: its
    (tokens x d_model) activations forward, their gradient backward, in the residual stream's dtype.
    Without sequence parallelism every tp rank sends the whole tensor (Megatron-LM's scatter/gather
    optimisation, which sends 1/tp and all-gathers, is not modelled); with sp each sends its 1/tp.
    Returns: message (bytes of one send), sends (per step, whole pipeline), total (bytes per step,
    whole pipeline), busiest_stage (bytes the busiest stage sends per step: a middle stage sends
    2 x V x microbatches messages; the first sends no gradient and the last no activation out of its
    first and last chunk).
    """
    for name, value in (("tokens", tokens), ("d_model", d_model), ("elem_bytes", elem_bytes), ("pp", pp),
                        ("virtual_stages", virtual_stages), ("microbatches", microbatches), ("tp", tp)):
        check_int(name, value)
    message = -(-tokens * d_model * elem_bytes // (tp if sp else 1))
    boundaries = pp * virtual_stages - 1
    sends = 2 * microbatches * boundaries
    if pp == 1:
        return {"message": 0, "sends": 0, "total": 0, "busiest_stage": 0}
    busiest = (2 * virtual_stages - (1 if pp == 2 else 0)) * microbatches
    return {"message": message, "sends": sends, "total": sends * message, "busiest_stage": busiest * message}


__all__ = ["inference_comm", "p2p_send_s", "pipeline_bubble_fraction", "pipeline_p2p_bytes", "ring_allreduce_s",
           "train_comm"]
