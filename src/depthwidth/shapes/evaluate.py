"""Everything `plan` and `compare` report about a shape: the `calc` summary (parameters, FLOPs, memory),
roofline latency (prefill, decode at batch 1, decode throughput at a batch) and lint findings.

`evaluate_shape` gathers them (each number computed by its own module: `summarize`, `latency`, `lint`);
`plan` evaluates every member of a `plan_family` family and marks the Pareto-best ones on
(decode latency at batch 1, training memory per device); `compare` evaluates shapes side by side
with the ratios of each quantity to the first shape's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from depthwidth.errors import UserError
from depthwidth.serial import Serializable
from depthwidth.shapes.checks import check_int
from depthwidth.shapes.families import Family, plan_family
from depthwidth.shapes.lint import tp_problem
from depthwidth.shapes.hardware import HardwareSpec, get_hardware
from depthwidth.shapes.latency import LatencyBreakdown, predict_decode, predict_prefill
from depthwidth.shapes.lint import Finding, lint
from depthwidth.shapes.memory import KV_DTYPES
from depthwidth.shapes.shape import Shape
from depthwidth.shapes.summary import Summary, summarize

#: (label, dotted key of ShapeEvaluation.to_dict()) of the quantities compared and put in tables.
QUANTITIES = (
    ("layers", "shape.n_layers"),
    ("width", "shape.d_model"),
    ("heads", "shape.n_heads"),
    ("kv heads", "shape.n_kv_heads"),
    ("d_ff", "shape.d_ff"),
    ("params", "params.total"),
    ("non-embedding params", "params.non_embedding"),
    ("d_model / n_layers", "derived.aspect_ratio"),
    ("train FLOPs / token", "flops.train_per_token"),
    ("training memory / device", "memory.total_training_bytes"),
    ("activation memory / layer", "memory.activation_bytes_per_layer"),
    ("KV cache / token", "memory.kv_cache_bytes_per_token"),
    ("prefill ms", "latency.prefill_ms"),
    ("decode ms / token", "latency.decode_ms"),
    ("tokens/s at batch", "latency.tokens_per_s"),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload(Serializable):
    """What the numbers are for. seq_len: training sequence and prefill prompt length (decode context
    too); batch: sequences per device for training memory and the KV cache, and the decode batch of
    the throughput column; dtype: inference compute dtype of the roofline; tp, pp: parallel degrees;
    virtual_stages, microbatches: the pipeline schedule (`depthwidth.shapes.pipeline`); convention,
    residual_dtype, grad_dtype: the training-memory accounting (`depthwidth.shapes.memory`)."""

    seq_len: int
    batch: int = 1
    dtype: str = "bf16"
    tp: int = 1
    pp: int = 1
    virtual_stages: int = 1
    microbatches: int | None = None
    train_precision: str = "bf16-mixed"
    attn_impl: str = "fused"
    convention: str = "amp"
    residual_dtype: str | None = None
    grad_dtype: str | None = None

    def __post_init__(self) -> None:
        for name in ("seq_len", "batch", "tp", "pp", "virtual_stages"):
            check_int(name, getattr(self, name))


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeEvaluation:
    summary: Summary
    prefill: LatencyBreakdown  # batch 1, prompt of seq_len tokens
    decode: LatencyBreakdown  # batch 1, one token after seq_len of context
    decode_batch: LatencyBreakdown  # `batch` sequences, one token each
    findings: tuple[Finding, ...]
    hardware: str

    def to_dict(self) -> dict[str, Any]:
        out = self.summary.to_dict()
        out["latency"] = {
            "hardware": self.hardware,
            "dtype": self.prefill.dtype,
            "prefill_ms": self.prefill.total_s * 1e3,
            "decode_ms": self.decode.total_s * 1e3,
            "decode_batch": self.decode_batch.batch,
            "decode_batch_ms": self.decode_batch.total_s * 1e3,
            "tokens_per_s": self.decode_batch.tokens_per_s,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
        }
        out["lint"] = [f.to_dict() for f in self.findings]
        return out


def evaluate_shape(shape: Shape, *, hardware: HardwareSpec | str, workload: Workload) -> ShapeEvaluation:
    hw = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
    w = workload
    if w.pp > shape.n_layers:
        raise UserError(f"pp={w.pp} exceeds n_layers={shape.n_layers} of {shape.label()}")
    summary = summarize(shape, seq_len=w.seq_len, micro_batch=w.batch, tp=w.tp, train_precision=w.train_precision,
                        attn_impl=w.attn_impl, kv_dtype=w.dtype if w.dtype in KV_DTYPES else "bf16", pp=w.pp,
                        virtual_stages=w.virtual_stages, microbatches=w.microbatches, convention=w.convention,
                        residual_dtype=w.residual_dtype, grad_dtype=w.grad_dtype)
    common = dict(hardware=hw, dtype=w.dtype, tp=w.tp, pp=w.pp, attn_impl=w.attn_impl)
    return ShapeEvaluation(
        summary=summary,
        prefill=predict_prefill(shape, batch=1, prompt_len=w.seq_len, **common),
        decode=predict_decode(shape, batch=1, context=w.seq_len, **common),
        decode_batch=predict_decode(shape, batch=w.batch, context=w.seq_len, **common),
        findings=tuple(lint(shape, hardware=hw, tp=w.tp, pp=w.pp)),
        hardware=hw.name,
    )


def value_at(record: dict[str, Any], key: str) -> Any:
    """record['a']['b'] for key 'a.b'."""
    for part in key.split("."):
        record = record[part]
    return record


def pareto_front(points: Sequence[tuple[float, float]]) -> list[bool]:
    """True for each point no other point beats on both coordinates (lower is better) while being
    strictly lower on at least one."""
    return [
        not any(q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1]) for q in points)
        for p in points
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanResult:
    family: Family
    evaluations: tuple[ShapeEvaluation, ...]
    pareto: tuple[bool, ...]
    workload: Workload
    hardware: HardwareSpec

    def members(self) -> list[dict[str, Any]]:
        """Per member: the keys of `calc --json`, plus latency.*, lint and plan.*."""
        out = []
        for member, ev, best in zip(self.family.members, self.evaluations, self.pareto):
            record = ev.to_dict()
            record["plan"] = {
                "error": member.error, "value": member.value, "target": self.family.target,
                "target_name": self.family.target_name, "pareto": best, "exact_depth": member.exact_depth,
                "tokens": member.tokens, "train_flops": member.train_flops, "reasons": list(member.reasons),
            }
            if self.family.reference_params:
                record["plan"]["params_vs_6nd"] = member.params / self.family.reference_params - 1
            out.append(record)
        return out

    def to_dict(self) -> dict[str, Any]:
        family = self.family.to_dict()
        family.pop("members")
        return {"family": family, "workload": self.workload.to_dict(), "hardware": self.hardware.to_dict(),
                "pareto_axes": ["latency.decode_ms", "memory.total_training_bytes"], "members": self.members()}


def plan(*, hardware: HardwareSpec | str, workload: Workload, **family_args: Any) -> PlanResult:
    """`plan_family(**family_args, tp=workload.tp, pp=workload.pp, seq_len=workload.seq_len)`, each member
    evaluated; Pareto-best on (decode ms at batch 1, training memory per device) marked."""
    hw = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
    # members' depths are multiples of pp x virtual_stages: interleaving gives every chunk as many layers
    family = plan_family(tp=workload.tp, pp=workload.pp * workload.virtual_stages, seq_len=workload.seq_len,
                         **family_args)
    evaluations = tuple(evaluate_shape(m.shape, hardware=hw, workload=workload) for m in family.members)
    points = [(e.decode.total_s, float(e.summary.memory.total_training_bytes)) for e in evaluations]
    return PlanResult(family=family, evaluations=evaluations, pareto=tuple(pareto_front(points)), workload=workload,
                      hardware=hw)


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    names: tuple[str, ...]
    evaluations: tuple[ShapeEvaluation, ...]
    workload: Workload
    hardware: HardwareSpec

    def ratios(self) -> list[dict[str, float | None]]:
        """Per shape after the first: quantity -> value / first shape's value."""
        records = [e.to_dict() for e in self.evaluations]
        out = []
        for rec in records[1:]:
            row = {}
            for _, key in QUANTITIES:
                a, b = value_at(records[0], key), value_at(rec, key)
                row[key] = b / a if a else None
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        shapes = []
        for name, ev in zip(self.names, self.evaluations):
            record = ev.to_dict()
            record["name"] = name
            shapes.append(record)
        return {"workload": self.workload.to_dict(), "hardware": self.hardware.to_dict(), "shapes": shapes,
                "ratios_to_first": [{"name": n, **r} for n, r in zip(self.names[1:], self.ratios())]}


def compare(shapes: Sequence[tuple[str, Shape]], *, hardware: HardwareSpec | str, workload: Workload) -> Comparison:
    """Evaluate (name, shape) pairs under one workload. With tp > 1, tp must divide the heads of at least
    one shape (ValueError otherwise); the others carry DW003 findings."""
    if len(shapes) < 2:
        raise UserError(f"compare needs two or more shapes, got {len(shapes)}")
    hw = hardware if isinstance(hardware, HardwareSpec) else get_hardware(hardware)
    if workload.tp > 1 and all(tp_problem(s, workload.tp) for _, s in shapes):
        heads = ", ".join(f"{name}: {s.n_heads} heads/{s.n_kv_heads} kv" for name, s in shapes)
        raise UserError(f"tp={workload.tp} divides the heads of none of the shapes ({heads})")
    evaluations = tuple(evaluate_shape(s, hardware=hw, workload=workload) for _, s in shapes)
    return Comparison(names=tuple(n for n, _ in shapes), evaluations=evaluations, workload=workload, hardware=hw)


__all__ = ["Comparison", "PlanResult", "QUANTITIES", "ShapeEvaluation", "Workload", "compare", "evaluate_shape",
           "pareto_front", "plan", "value_at"]
