"""The study-level records of a report: one `RunSummary` per stored run, the study's `Protocol`, and the
`StudyData` that holds them with the study's spec and its per-shape results.

A per-shape result is the study's own `depthwidth.study.summary.ShapeResult` (the one type every table
renders); `report.data.load_study` is the one place that fills these records from a study store, so
tables, plots, fits and the recommendation can be tested on synthetic rows without training anything.
Their dict forms (the report's JSON export) are the generic ones of `depthwidth.serial`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from depthwidth.errors import UserError
from depthwidth.serial import Serializable, hook
from depthwidth.study.store import STATUSES
from depthwidth.data.baselines import NgramBaselines
from depthwidth.study.summary import ShapeResult

RUN_STATUSES = STATUSES  # a stored run's status


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary(Serializable):
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
    #: this run's own validation loss per slice and probe accuracy by difficulty (a ShapeResult holds their
    #: means over seeds): what the report's seed error bars are drawn from
    slice_losses: dict[str, float] = field(default_factory=dict)
    probe_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise UserError(f"status={self.status!r} is not allowed; expected one of {', '.join(RUN_STATUSES)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Protocol(Serializable):
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
    parametrizations: dict[str, str] = field(default_factory=dict)  # group -> TrainConfig.parametrization
    lr_search: dict[str, str] = field(default_factory=dict)  # group -> how its learning rates were chosen

    def parametrization_text(self) -> str:
        """'sp' when every group shares one, else 'N500K-sp: sp; N500K-completep: completep'."""
        values = set(self.parametrizations.values())
        if len(values) <= 1:
            return next(iter(values), "sp")
        return "; ".join(f"{g}: {p}" for g, p in self.parametrizations.items())

    def lr_search_text(self) -> str:
        values = set(self.lr_search.values())
        if len(values) <= 1:
            return next(iter(values), "-")
        return "; ".join(f"{g}: {d}" for g, d in self.lr_search.items())


@dataclass(frozen=True, kw_only=True, slots=True)
class StudyData(Serializable):
    """Everything a report shows about one study."""

    name: str
    description: str
    folder: str
    spec: dict[str, Any]
    spec_text: str = field(metadata=hook(skip=True))  # the spec file's text (the dict form has `spec`)
    protocol: Protocol
    results: tuple[ShapeResult, ...]
    runs: tuple[RunSummary, ...]
    notes: tuple[str, ...] = field(default=())  # protocol warnings of the study summary
    #: the validation split's unigram and bigram cross-entropy (`depthwidth.data.baselines`; None: not known)
    baselines: NgramBaselines | None = None
    #: the HardwareSpec (as a dict) the benches predicted with
    bench_hardware: dict[str, Any] | None = field(default=None, metadata=hook(skip=True))

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


__all__ = ["Protocol", "RunSummary", "StudyData", "RUN_STATUSES"]
