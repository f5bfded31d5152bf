"""The one per-shape result of a study (`ShapeResult`) and a run's loss curve (`CurveSeries`): `study status`,
`study show`, the demo, the report (its tables, plots, fits, CSV/JSON export) and `recommend` all read it;
`depthwidth.study.summary.summarize` builds it from the store. The dict forms are the generic ones of
`depthwidth.serial`, derived values right after the fields they follow from.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from depthwidth.errors import UserError
from depthwidth.serial import Serializable, hook
from depthwidth.shapes.shape import Shape


def _lr_keys(lr_losses: dict[float, float | None]) -> dict[str, float | None]:
    """JSON keys are text: each learning rate as its repr (read back as a float by `serial.from_dict`)."""
    return {repr(lr): loss for lr, loss in lr_losses.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class CurveSeries(Serializable):
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


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeResult(Serializable):
    """One shape of one budget group, its seeds aggregated at its selected learning rate.

    Losses are validation cross-entropy in nats per token. `seed_losses` are the completed runs at
    `best_lr`, one per seed (`best_run_ids`); `lr_losses` is the mean loss per learning rate tried
    (None when a run at that LR diverged, failed or has not finished). Speed, MFU, memory, slice
    losses and probe accuracy are means over those seeds. Measured latencies are batch 1, from the
    shape's bench run on `bench_hardware` (the profile its predictions used): prefill of the first
    prompt length, decode of one token with the first context length cached; `bench_predicted_*`
    are that profile's roofline predictions; throughput is generation at the largest batch measured.
    `shape` is the last field: its dict form comes last, followed by the derived columns.
    """

    group: str
    shape_label: str
    params: int
    non_embedding_params: int
    train_flops_per_token: float  # model FLOPs at the study's sequence length
    lr_losses: dict[float, float | None] = field(metadata=hook(encode=_lr_keys))  # ascending lr
    best_lr: float | None
    best_run_ids: tuple[str, ...] = ()
    lr_edge: str | None = None  # "low" | "high": the best LR is at that end of the grid
    warning: str | None = None  # the learning-rate selection's protocol warning
    lr_mode: str = "grid"  # how best_lr was chosen: "grid" | "bracket" | "transfer" (study.lr_search)
    lr_optimum: float | None = None  # interpolated optimum (parabola in log LR), when bracketed
    lr_bracketed: bool | None = None  # the best LR has a tried LR on each side (None: transferred)
    lr_transfer_from: str | None = None  # "transfer": the shape whose best LR this one reuses
    lr_max_trials: int | None = None  # the search budget every shape of the group shares
    #: `[lr] verify` (`depthwidth.study.verify`): mean loss over the seeds at each extra LR tried around the
    #: transferred one (None: unfinished or diverged), and the verdict in words
    lr_verify: dict[float, float | None] = field(default_factory=dict, metadata=hook(encode=_lr_keys))
    lr_verify_note: str | None = None
    #: `[lr] verify = "adapt"`: the shape's group failed its transfer check, so every shape was re-tuned;
    #: best_lr, seed_losses and best_run_ids are then the re-tune's best (ties keep the transferred LR), and
    #: the transferred LR and its seeds' losses are kept here (None / () for a shape that was not re-tuned)
    lr_adapted: bool = False
    lr_transferred: float | None = None
    transferred_losses: tuple[float, ...] = field(default=(), metadata=hook(followed_by=("transferred_loss",)))
    parametrization: str = "sp"  # of the shape's runs (TrainConfig.parametrization)
    seed_losses: tuple[float, ...] = ()
    #: the validity gate (`depthwidth.study.validity`): nats below the validation split's bigram baseline
    #: (positive: better than the bigram table), and whether that counts as learned (None: no baseline)
    bigram_gain: float | None = None
    learned: bool | None = None
    slice_losses: dict[str, float] = field(default_factory=dict)
    #: {probe: {difficulty: exact-match accuracy}} (probe slices only)
    probe_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)
    tokens: int | None = None  # trained tokens of the best run
    tokens_per_s: float | None = None
    mfu: float | None = None
    peak_memory_bytes: float | None = None
    #: multi-process runs (`depthwidth.study.comm_columns`): per trained token, means over seeds; None for 1 process
    comm_bytes_per_token: float | None = None  # measured, one rank's collective bytes per step / tokens per step
    comm_seconds_per_token: float | None = None
    comm_fraction: float | None = None  # measured communication seconds over step seconds
    predicted_comm_bytes_per_token: float | None = None  # depthwidth.shapes.collectives (exact)
    predicted_comm_seconds_per_token: float | None = None  # from the measured link (None before it is measured)
    comm_nproc: int | None = None
    comm_tp: int | None = None
    comm_parallel: str | None = None
    measured_prefill_ms: float | None = None
    bench_predicted_prefill_ms: float | None = None
    bench_prompt_len: int | None = None
    measured_decode_ms: float | None = None
    bench_predicted_decode_ms: float | None = None
    bench_context: int | None = None
    throughput_tokens_per_s: float | None = None
    throughput_batch: int | None = None
    bench_hardware: str | None = None
    bench_device: str | None = None  # where the bench measured: "cpu", "cuda", "cuda:N" (results of before: "cpu")
    int8_loss_change: float | None = None
    #: [inspect] (`depthwidth.study.inspections`): the per-layer diagnostics of the first completed seed at
    #: best_lr on its own validation windows; blocks are numbered from 0
    effective_depth: int | None = None  # blocks a greedy removal keeps within inspect_tolerance nats
    inspect_tolerance: float | None = None
    inspect_loss: float | None = None  # the whole model's loss on the inspected windows (nats per token)
    most_important_block: int | None = None  # the block whose removal raises the loss most
    least_important_block: int | None = None  # ... least
    inspection: dict | None = None  # the whole report (`Inspection.to_dict()`) and the run it measured
    curves: tuple[CurveSeries, ...] = field(default=(), metadata=hook(skip=True))  # filled by the report's loader
    eval_noise: float | None = None  # one-seed noise estimate from the curves (see report.noise)
    shape: Shape = field(metadata=hook(followed_by=(
        "n_layers", "d_model", "n_heads", "aspect_ratio", "lr_grid", "lr_trials", "n_seeds", "val_loss",
        "val_loss_std")))

    def __post_init__(self) -> None:
        if any(not (isinstance(v, (int, float)) and math.isfinite(v)) for v in self.seed_losses):
            raise UserError(f"seed_losses={self.seed_losses!r} must be finite numbers")

    @property
    def key(self) -> str:
        return f"{self.group}/{self.shape_label}"

    @property
    def n_layers(self) -> int:
        return self.shape.n_layers

    @property
    def d_model(self) -> int:
        return self.shape.d_model

    @property
    def n_heads(self) -> int:
        return self.shape.n_heads

    @property
    def aspect_ratio(self) -> float:
        return self.shape.aspect_ratio

    @property
    def lr_grid(self) -> tuple[float, ...]:
        return tuple(self.lr_losses)

    @property
    def lr_trials(self) -> int:
        return len(self.lr_losses)

    @property
    def n_seeds(self) -> int:
        return len(self.seed_losses)

    @property
    def val_loss(self) -> float | None:
        """Mean over seeds at the best learning rate."""
        return statistics.fmean(self.seed_losses) if self.seed_losses else None

    @property
    def val_loss_std(self) -> float | None:
        """Sample standard deviation over seeds (None with fewer than 2)."""
        return statistics.stdev(self.seed_losses) if len(self.seed_losses) > 1 else None

    @property
    def transferred_loss(self) -> float | None:
        """A re-tuned shape's mean loss over seeds at the transferred LR (None otherwise)."""
        return statistics.fmean(self.transferred_losses) if self.transferred_losses else None


__all__ = ["CurveSeries", "ShapeResult"]
