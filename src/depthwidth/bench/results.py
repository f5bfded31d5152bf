"""Typed results of a serving benchmark (`depthwidth.bench.serving.bench`): one dataclass per concept.

Every measured latency carries the roofline prediction for the measured hardware profile of the
machine and the ratio measured / predicted (> 1: slower than predicted). Each result's dict form
(`to_dict`, what `bench --json` prints and a study stores) is the generic one of `depthwidth.serial`:
the fields in order, the measured `timing` under "seconds", derived values (ratios, throughputs) right
after the fields they follow from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from depthwidth.bench.timing import Timing
from depthwidth.serial import Serializable, hook

LATENCY_KINDS = ("prefill", "decode")


def _ratio(measured: float, predicted: float) -> float | None:
    return measured / predicted if predicted > 0 else None


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyPoint(Serializable):
    """Batch-`batch` latency of one step: a prefill of `tokens` prompt tokens (time to first token)
    or one decode step with `tokens` tokens already in the KV cache."""

    variant: str  # "fp32" | "bf16" | "int8"
    kind: str  # "prefill" | "decode"
    batch: int
    tokens: int
    timing: Timing = field(metadata=hook(key="seconds"))  # seconds
    predicted_s: float = field(metadata=hook(followed_by=("ratio",)))

    def __post_init__(self) -> None:
        if self.kind not in LATENCY_KINDS:
            raise ValueError(f"kind={self.kind!r} is not allowed; expected one of {', '.join(LATENCY_KINDS)}")

    @property
    def ratio(self) -> float | None:
        return _ratio(self.timing.median, self.predicted_s)



@dataclass(frozen=True, kw_only=True, slots=True)
class ThroughputPoint(Serializable):
    """Generation of `new_tokens` tokens for `batch` sequences after a `prompt_len` prompt
    (prefill included); throughput = batch * new_tokens / median seconds."""

    variant: str
    batch: int
    prompt_len: int
    new_tokens: int
    timing: Timing = field(metadata=hook(key="seconds", followed_by=("tokens_per_s",)))  # per whole generation
    predicted_s: float = field(metadata=hook(followed_by=("predicted_tokens_per_s", "ratio")))

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.new_tokens / self.timing.median

    @property
    def predicted_tokens_per_s(self) -> float | None:
        return self.batch * self.new_tokens / self.predicted_s if self.predicted_s > 0 else None

    @property
    def ratio(self) -> float | None:
        """Measured / predicted time (the inverse of the throughput ratio)."""
        return _ratio(self.timing.median, self.predicted_s)



@dataclass(frozen=True, kw_only=True, slots=True)
class KVCacheCheck(Serializable):
    """KV-cache bytes summed over the cache tensors' cached tokens against the analytic value
    2 * L * n_kv_heads * head_dim * bytes * tokens * batch (`shapes.memory`)."""

    variant: str
    dtype: str  # dtype of the cache tensors
    batch: int
    tokens: int
    measured_bytes: int
    analytic_bytes: int = field(metadata=hook(followed_by=("equal",)))

    @property
    def equal(self) -> bool:
        return self.measured_bytes == self.analytic_bytes



@dataclass(frozen=True, kw_only=True, slots=True)
class QuantizationReport(Serializable):
    """What int8 dynamic quantization changed: how many Linear layers, the validation loss before
    and after (trained checkpoints only), and the lint's group-size findings for the shape."""

    quantized_linears: int
    weight_bytes_before: int
    weight_bytes_after: int
    val_loss_before: float | None
    val_loss_after: float | None = field(metadata=hook(followed_by=("val_loss_change",)))
    group_size: int
    lint_findings: tuple[str, ...]

    @property
    def val_loss_change(self) -> float | None:
        if self.val_loss_before is None or self.val_loss_after is None:
            return None
        return self.val_loss_after - self.val_loss_before



@dataclass(frozen=True, kw_only=True, slots=True)
class BenchResult(Serializable):
    """Everything one `bench` run measured, with the conditions it ran under."""

    target: str  # shape label, or the checkpoint path
    checkpoint: str | None
    shape: dict[str, Any]
    config: dict[str, Any]
    environment: dict[str, Any]  # torch version, threads, dtype, quantized engine, cpu
    hardware: dict[str, Any]  # the profile the predictions used
    latency: tuple[LatencyPoint, ...]
    throughput: tuple[ThroughputPoint, ...]
    kv_cache: tuple[KVCacheCheck, ...]
    quantization: QuantizationReport | None



__all__ = ["BenchResult", "KVCacheCheck", "LatencyPoint", "QuantizationReport", "ThroughputPoint"]
