"""The typed rows a report is built from: one `ShapeResult` per shape and budget group, one `RunSummary`
per stored run, and the `StudyData` that holds them with the study's spec and protocol.

`report.data.load_study` is the one place that fills them from a study store; everything else in
`report/` reads these rows only, so tables, plots, fits and the recommendation can be tested on
synthetic rows without training anything.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from depthwidth.errors import UserError
from depthwidth.shapes.shape import Shape

RUN_STATUSES = ("pending", "running", "completed", "diverged", "failed")


@dataclass(frozen=True, kw_only=True, slots=True)
class CurveSeries:
    """Validation (and training) loss against training tokens of one run (one seed at the shape's
    selected LR)."""

    seed: int
    tokens: tuple[float, ...]
    val_loss: tuple[float, ...]
    train_tokens: tuple[float, ...] = ()  # the per-step training loss, when stored
    train_loss: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.val_loss):
            raise UserError(f"tokens has {len(self.tokens)} points but val_loss has {len(self.val_loss)}")
        if len(self.train_tokens) != len(self.train_loss):
            raise UserError(f"train_tokens has {len(self.train_tokens)} points but train_loss has "
                             f"{len(self.train_loss)}")

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "tokens": list(self.tokens), "val_loss": list(self.val_loss),
                "train_tokens": list(self.train_tokens), "train_loss": list(self.train_loss)}


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeResult:
    """One shape of one budget group, its seeds aggregated at its selected learning rate.

    Losses are validation cross-entropy in nats per token. `seed_losses` are the completed runs at
    `best_lr`, one per seed; `lr_losses` is the mean loss per learning rate tried (None when every run
    at that LR diverged or failed). Measured latencies come from the group's bench run on
    `bench_hardware` (the profile its predictions used); `bench_predicted_*` are those predictions.
    """

    group: str
    label: str
    shape: Shape
    params: int
    non_embedding_params: int
    train_flops_per_token: float
    tokens: int
    lr_grid: tuple[float, ...]
    lr_losses: dict[float, float | None]
    best_lr: float | None
    seed_losses: tuple[float, ...]
    slice_losses: dict[str, float]
    tokens_per_s: float | None = None
    mfu: float | None = None
    peak_memory_bytes: float | None = None
    measured_prefill_ms: float | None = None
    measured_decode_ms: float | None = None
    bench_predicted_prefill_ms: float | None = None
    bench_predicted_decode_ms: float | None = None
    bench_hardware: str | None = None
    bench_prompt_len: int | None = None
    bench_context: int | None = None
    int8_loss_change: float | None = None
    curves: tuple[CurveSeries, ...] = ()
    eval_noise: float | None = None  # one-seed noise estimate (see report.noise)
    lr_edge: str | None = None  # "low" | "high": the best LR is at that end of the grid
    warnings: tuple[str, ...] = ()
    #: {probe: {difficulty: exact-match accuracy}}, mean over seeds at the best LR (probe slices only)
    probe_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if any(not (isinstance(v, (int, float)) and math.isfinite(v)) for v in self.seed_losses):
            raise UserError(f"seed_losses={self.seed_losses!r} must be finite numbers")

    @property
    def aspect_ratio(self) -> float:
        return self.shape.aspect_ratio

    @property
    def n_layers(self) -> int:
        return self.shape.n_layers

    @property
    def d_model(self) -> int:
        return self.shape.d_model

    @property
    def n_seeds(self) -> int:
        return len(self.seed_losses)

    @property
    def loss_mean(self) -> float | None:
        return statistics.fmean(self.seed_losses) if self.seed_losses else None

    @property
    def loss_std(self) -> float | None:
        """Sample standard deviation over seeds (None with fewer than 2)."""
        return statistics.stdev(self.seed_losses) if len(self.seed_losses) > 1 else None

    @property
    def key(self) -> str:
        return f"{self.group}/{self.label}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "label": self.label,
            "shape": self.shape.to_dict(),
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "aspect_ratio": self.aspect_ratio,
            "params": self.params,
            "non_embedding_params": self.non_embedding_params,
            "train_flops_per_token": self.train_flops_per_token,
            "tokens": self.tokens,
            "lr_grid": list(self.lr_grid),
            "lr_losses": {repr(k): v for k, v in self.lr_losses.items()},
            "best_lr": self.best_lr,
            "seed_losses": list(self.seed_losses),
            "loss_mean": self.loss_mean,
            "loss_std": self.loss_std,
            "n_seeds": self.n_seeds,
            "slice_losses": dict(self.slice_losses),
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "peak_memory_bytes": self.peak_memory_bytes,
            "measured_prefill_ms": self.measured_prefill_ms,
            "measured_decode_ms": self.measured_decode_ms,
            "bench_predicted_prefill_ms": self.bench_predicted_prefill_ms,
            "bench_predicted_decode_ms": self.bench_predicted_decode_ms,
            "bench_hardware": self.bench_hardware,
            "bench_prompt_len": self.bench_prompt_len,
            "bench_context": self.bench_context,
            "int8_loss_change": self.int8_loss_change,
            "eval_noise": self.eval_noise,
            "lr_edge": self.lr_edge,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """One stored run as the report lists it."""

    run_id: str
    kind: str  # "train" | "bench"
    group: str
    label: str
    lr: float | None
    seed: int | None
    status: str
    error: str | None = None
    val_loss: float | None = None
    diverged_at_step: int | None = None

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise UserError(f"status={self.status!r} is not allowed; expected one of {', '.join(RUN_STATUSES)}")

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "kind": self.kind, "group": self.group, "label": self.label, "lr": self.lr,
                "seed": self.seed, "status": self.status, "error": self.error, "val_loss": self.val_loss,
                "diverged_at_step": self.diverged_at_step}


@dataclass(frozen=True, kw_only=True, slots=True)
class Protocol:
    """What every run of the study shared (or, listed in `warnings`, did not)."""

    corpus: str
    corpus_hashes: tuple[str, ...]
    tokenizer: str
    seq_len: int
    batch_size: int
    tokens_by_group: dict[str, int]
    lr_grid: str  # a description of the grid
    lr_trials: tuple[int, ...]  # distinct LR-trial counts over the runs (fair: one value)
    seeds: tuple[int, ...]
    batch_stream_hashes: tuple[str, ...]
    hardware: str
    fair: bool = True
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"corpus": self.corpus, "corpus_hashes": list(self.corpus_hashes), "tokenizer": self.tokenizer,
                "seq_len": self.seq_len, "batch_size": self.batch_size, "tokens_by_group": dict(self.tokens_by_group),
                "lr_grid": self.lr_grid, "lr_trials": list(self.lr_trials), "seeds": list(self.seeds),
                "batch_stream_hashes": list(self.batch_stream_hashes), "hardware": self.hardware, "fair": self.fair,
                "warnings": list(self.warnings)}


@dataclass(frozen=True, kw_only=True, slots=True)
class StudyData:
    """Everything a report shows about one study."""

    name: str
    description: str
    folder: str
    spec: dict[str, Any]
    spec_text: str
    protocol: Protocol
    results: tuple[ShapeResult, ...]
    runs: tuple[RunSummary, ...]
    notes: tuple[str, ...] = field(default=())  # protocol warnings of the study summary
    bench_hardware: dict[str, Any] | None = None  # the HardwareSpec (as a dict) the benches predicted with

    @property
    def groups(self) -> tuple[str, ...]:
        seen: list[str] = []
        for r in self.results:
            if r.group not in seen:
                seen.append(r.group)
        return tuple(seen)

    @property
    def problem_runs(self) -> tuple[RunSummary, ...]:
        """Runs that did not complete: failed, diverged, or not (yet) run."""
        return tuple(r for r in self.runs if r.status != "completed")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "folder": self.folder, "spec": self.spec,
                "protocol": self.protocol.to_dict(), "results": [r.to_dict() for r in self.results],
                "runs": [r.to_dict() for r in self.runs], "notes": list(self.notes)}


__all__ = ["CurveSeries", "Protocol", "RunSummary", "ShapeResult", "StudyData", "RUN_STATUSES"]
