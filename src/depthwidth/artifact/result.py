"""`TrainResult`: what one training run measured; `TrainProgress`: what a progress callback sees."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

STATUSES = ("completed", "diverged", "failed")
RESULT_SCHEMA = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainResult:
    """One run's measurements.

    Losses are mean cross-entropy in nats per token on the fixed validation windows
    (`val_loss` weights each slice by its validation tokens; `val_loss_by_position` splits the
    context into `len(position_buckets)` equal buckets). Speeds count training steps only:
    evaluation and checkpointing are excluded, and so are the warm-up steps (allocator, kernel
    choice, compilation: the first `train.speed.WARMUP_STEPS` steps of each process, flagged in the
    curve, timed one by one on every device) when others are left. `achieved_flops_per_s` = analytic
    model FLOPs per token (`depthwidth.shapes.flops.flops(...).train_per_token`) x tokens/s; `mfu`
    divides it by `peak_flops` (from `peak_flops_source`: the machine's measured GEMM rate, timed before
    the run's memory peak is reset), `mfu_vendor` by the vendor's dense peak of the GPU
    (`vendor_peak_flops`, a table row; None on CPU). `dtype` is the dtype the run trained in
    (`train.speed.run_dtype`: on CUDA bf16 autocast by default), `tf32` whether fp32 matmuls ran in
    TF32, `compiled` whether the training forward ran through torch.compile. Each curve point has the
    step's wall `seconds` and the process CPU time `cpu_seconds` (all threads), which other load on a
    shared machine disturbs less. On CUDA `peak_memory_bytes` is torch.cuda.max_memory_allocated; on
    CPU it is the measured bytes of parameters, gradients and optimizer states plus `saved_activation_bytes` (tensors saved for backward in one micro-batch,
    counted with saved_tensors_hooks); `peak_rss_bytes` is the process's peak resident set.
    """

    status: str
    val_loss: float | None
    val_loss_by_slice: dict[str, float | None]
    val_loss_by_position: list[float | None]
    position_buckets: list[list[int]]
    tokens_per_s: float | None
    achieved_flops_per_s: float | None
    mfu: float | None
    peak_flops: float | None
    peak_flops_source: str
    peak_memory_bytes: int | None
    saved_activation_bytes: int | None
    state_bytes: int | None
    peak_rss_bytes: int | None
    params: int
    non_embedding_params: int
    train_flops_per_token: float
    train_seconds: float
    eval_seconds: float
    steps: int
    tokens: int
    curve: list[dict[str, float]]
    evals: list[dict[str, Any]]
    batch_stream_hash: str
    corpus_hash: str
    dataset_hash: str
    config_hash: str
    tokenizer: str
    vocab_size: int
    diverged_at_step: int | None = None
    error: str | None = None
    device: str = "cpu"
    dtype: str = "fp32"
    threads: int | None = None
    torch_version: str = ""
    shape: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    dataset: dict[str, Any] = field(default_factory=dict)
    #: {probe: {difficulty: exact-match accuracy}} on held-out probe examples (probe slices only)
    probe_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)
    #: one note per resume: the step and checkpoint it continued from and, after a fallback, why
    resumes: list[str] = field(default_factory=list)
    mfu_vendor: float | None = None
    vendor_peak_flops: float | None = None
    vendor_peak_source: str = ""
    compiled: bool = False
    tf32: bool = False
    #: multi-process runs (`depthwidth.train.comm_meter`): per optimizer step and collective kind, measured
    #: calls/bytes/seconds next to the analytic ones (`predicted_bytes`, `predicted_seconds`), the method
    #: and link; `comm_fraction` is measured communication seconds over step seconds. Empty/None for 1 process.
    comm: dict[str, Any] = field(default_factory=dict)
    comm_fraction: float | None = None
    schema: int = RESULT_SCHEMA
    #: a WSD run with `horizons`: one entry per horizon (`train.horizons.horizon_entry`: fraction, steps,
    #: tokens, the step its cooldown branched at, status, validation loss overall and by slice, seconds);
    #: the last is the run itself. Left out of the dict when empty, so other results keep their bytes.
    horizons: list[dict[str, Any]] = field(default_factory=list)
    #: `compile = "auto"`: the decision and its numbers (`train.compile_auto.Decision`); left out when None
    compile_auto: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r} is not allowed; expected one of {', '.join(STATUSES)}")

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; a NaN or infinite loss (in the curve of a diverged run) becomes None."""
        out = json_safe(asdict(self))
        if not out["horizons"]:
            del out["horizons"]
        if out["compile_auto"] is None:
            del out["compile_auto"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def summary(self) -> dict[str, Any]:
        """The headline numbers (what `depthwidth train --json` leads with)."""
        keys = ("status", "val_loss", "val_loss_by_slice", "val_loss_by_position", "tokens_per_s",
                "achieved_flops_per_s", "mfu", "mfu_vendor", "peak_memory_bytes", "params", "steps", "tokens",
                "diverged_at_step", "batch_stream_hash", "corpus_hash", "probe_accuracy")
        return {k: getattr(self, k) for k in keys}


def json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainProgress:
    """Passed to `train(..., progress=callback)` after training steps and evaluations."""

    phase: str  # "train" | "eval" | "done"
    step: int  # steps completed
    steps: int  # total steps of the run
    loss: float | None
    tokens_per_s: float | None
    eta_s: float | None
    val_loss: float | None = None
