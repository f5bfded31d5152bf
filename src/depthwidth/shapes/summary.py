"""`summarize`: everything the analytic core says about one shape in one typed result.

Parameters (`count_params`), FLOPs (`flops`) and memory (`memory`) are computed by their own
modules; this module only gathers them under fixed settings, so every command that reports a
shape (`calc`, `plan`, `compare`) emits the same JSON keys:

    shape.<every Shape field>          params.total / non_embedding / embedding / per_layer / ...
    derived.label / aspect_ratio ...   flops.forward_per_token / train_per_token / ...
    settings.seq_len / micro_batch ... memory.kv_cache_bytes_per_token / activation_bytes_per_layer / ...

`shape` holds exactly the Shape fields, so `Shape.from_dict(summary["shape"])` rebuilds the shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from depthwidth.errors import UserError
from depthwidth.serial import Serializable
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.activations import DEVICES, FLOAT_DTYPES
from depthwidth.shapes.ops import ATTN_KERNEL_ALIASES, ATTN_KERNELS
from depthwidth.shapes.flops import ATTENTION_KINDS, RECOMPUTE_KINDS, FlopBreakdown, flops
from depthwidth.shapes.memory import (
    CONVENTIONS, KV_DTYPES, OPTIMIZER_STATES, TRAIN_PRECISIONS, ZERO_STAGES, MemoryBreakdown, memory,
)
from depthwidth.shapes.params import ParamBreakdown, count_params
from depthwidth.shapes.shape import Shape

SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SummarySettings(Serializable):
    """The workload a summary is computed for. Each option is passed on unchanged to `flops`
    (attention, recompute) or `memory` (the rest); see their docstrings for the conventions.
    The KV cache is sized for micro_batch sequences of seq_len tokens.

    Defaults describe a usual GPU training run: bf16 mixed precision with fp32 master weights,
    AdamW, fused (flash/SDPA) attention, no dropout, no parallelism, PyTorch's CUDA kernels, PyTorch
    AMP's accounting (convention "amp"; "megatron" for Megatron-LM's, see `depthwidth.shapes.memory`).
    pp, virtual_stages, microbatches: pipeline parallelism (`depthwidth.shapes.pipeline`).
    """

    seq_len: int
    micro_batch: int = 1
    attention: str = "causal"
    recompute: str = "none"
    train_precision: str = "bf16-mixed"
    param_dtype: str = "fp32"
    optimizer: str = "adamw"
    zero_stage: int = 0
    dp: int = 1
    tp: int = 1
    sp: bool = False
    pp: int = 1
    virtual_stages: int = 1
    microbatches: int | None = None
    convention: str = "amp"
    residual_dtype: str | None = None
    grad_dtype: str | None = None
    attn_impl: str = "fused"
    dropout: bool = False
    device: str = "cuda"
    kv_dtype: str = "bf16"

    def __post_init__(self) -> None:
        for name in ("seq_len", "micro_batch", "dp", "tp", "pp", "virtual_stages"):
            check_int(name, getattr(self, name))
        for name, allowed in (
            ("attention", ATTENTION_KINDS),
            ("recompute", RECOMPUTE_KINDS),
            ("train_precision", TRAIN_PRECISIONS),
            ("param_dtype", FLOAT_DTYPES),
            ("optimizer", tuple(OPTIMIZER_STATES)),
            ("zero_stage", ZERO_STAGES),
            ("attn_impl", ATTN_KERNELS + tuple(ATTN_KERNEL_ALIASES)),
            ("device", DEVICES),
            ("kv_dtype", KV_DTYPES),
            ("convention", CONVENTIONS),
        ):
            check_choice(name, getattr(self, name), allowed)
        for name in ("residual_dtype", "grad_dtype"):
            if getattr(self, name) is not None:
                check_choice(name, getattr(self, name), FLOAT_DTYPES)
        for name in ("sp", "dropout"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name}={getattr(self, name)!r} must be true or false")


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    shape: Shape
    settings: SummarySettings
    params: ParamBreakdown
    flops: FlopBreakdown
    memory: MemoryBreakdown

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        return {
            "schema_version": SCHEMA_VERSION,
            "shape": s.to_dict(),
            "derived": {
                "label": s.label(),
                "aspect_ratio": s.aspect_ratio,
                "q_dim": s.q_dim,
                "kv_dim": s.kv_dim,
                "causal": s.causal,
            },
            "settings": self.settings.to_dict(),
            "params": self.params.to_dict(),
            "flops": self.flops.to_dict(),
            "memory": self.memory.to_dict(),
        }


def summarize(shape: Shape, *, settings: SummarySettings | None = None, **options: Any) -> Summary:
    """Parameters, FLOPs and memory of `shape` under `settings` (or the same options as keywords;
    seq_len defaults to shape.max_seq_len and attention to "causal" for a decoder, "full" for an
    encoder)."""
    if settings is None:
        options.setdefault("seq_len", shape.max_seq_len)
        options.setdefault("attention", "causal" if shape.causal else "full")
        settings = SummarySettings(**options)
    elif options:
        raise UserError(f"give either settings or keyword options, not both ({', '.join(options)})")
    st = settings
    if st.seq_len > shape.max_seq_len:
        raise UserError(f"seq_len={st.seq_len} exceeds max_seq_len={shape.max_seq_len} of the shape")
    return Summary(
        shape=shape,
        settings=st,
        params=count_params(shape),
        flops=flops(shape, seq_len=st.seq_len, attention=st.attention, recompute=st.recompute),
        memory=memory(
            shape,
            seq_len=st.seq_len,
            micro_batch=st.micro_batch,
            param_dtype=st.param_dtype,
            train_precision=st.train_precision,
            optimizer=st.optimizer,
            zero_stage=st.zero_stage,
            dp=st.dp,
            tp=st.tp,
            sp=st.sp,
            pp=st.pp,
            virtual_stages=st.virtual_stages,
            microbatches=st.microbatches,
            convention=st.convention,
            residual_dtype=st.residual_dtype,
            grad_dtype=st.grad_dtype,
            recompute=st.recompute,
            attn_impl=st.attn_impl,
            dropout=st.dropout,
            device=st.device,
            kv_dtype=st.kv_dtype,
            kv_batch=st.micro_batch,
            kv_context=st.seq_len,
        ),
    )


__all__ = ["SCHEMA_VERSION", "Summary", "SummarySettings", "summarize"]
