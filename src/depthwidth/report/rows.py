"""The study-level records of a report: one `RunSummary` per stored run, the study's `Protocol`, and the
`StudyData` that holds them with the study's spec and its per-shape results.

A per-shape result is the study's own `depthwidth.study.summary.ShapeResult` (the one type every table
renders); `report.data.load_study` is the one place that fills these records from a study store, so
tables, plots, fits and the recommendation can be tested on synthetic rows without training anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from depthwidth.errors import UserError
from depthwidth.study.store import STATUSES
from depthwidth.study.summary import ShapeResult

RUN_STATUSES = STATUSES  # a stored run's status


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

    def to_dict(self) -> dict[str, Any]:
        return {"corpus": self.corpus, "corpus_hashes": list(self.corpus_hashes), "tokenizer": self.tokenizer,
                "seq_len": self.seq_len, "batch_size": self.batch_size, "tokens_by_group": dict(self.tokens_by_group),
                "lr_grid": self.lr_grid, "lr_trials": list(self.lr_trials), "seeds": list(self.seeds),
                "batch_stream_hashes": list(self.batch_stream_hashes), "hardware": self.hardware, "fair": self.fair,
                "warnings": list(self.warnings), "parametrizations": dict(self.parametrizations),
                "lr_search": dict(self.lr_search)}


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


__all__ = ["Protocol", "RunSummary", "StudyData", "RUN_STATUSES"]
