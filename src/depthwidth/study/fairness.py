"""Is a study's comparison fair? Checked from what is stored, so a study that was edited, mixed or
tampered with is caught after the fact.

Over the training runs the current spec asks for:
- data: the same corpus (content hash), tokenizer, split and batch geometry for every run;
- settings: the same training settings apart from the learning rate (warmup, schedule, betas, dtype, ...);
- tokens: the same token budget within each budget group - in the configs and in what the results say
  was trained;
- batch_stream_hash: the same batch stream (data order) within each (group, seed), over completed runs;
- lr_trials: the same declared number of learning-rate trials for every shape, and the same number of
  stored trials per (group, shape, seed);
- seeds: the same seeds for every shape of a group.
A finding names the field, where it differs, and which runs hold which value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from depthwidth.study.run_config import canonical_json, run_data, run_settings, run_tokens
from depthwidth.study.store import ResultRecord, RunRecord

FIELDS = ("data", "settings", "tokens", "batch_stream_hash", "lr_trials", "seeds")


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    field: str  # one of FIELDS
    scope: str  # "study", "group 'P500k'", "group 'P500k' seed 0"
    values: dict[str, list[str]]  # value (as text) -> short ids of the runs holding it

    @property
    def message(self) -> str:
        parts = [f"{value} ({len(ids)} run{'s' if len(ids) != 1 else ''}: {', '.join(ids[:3])}"
                 f"{', ...' if len(ids) > 3 else ''})" for value, ids in self.values.items()]
        return f"{self.field} differs within {self.scope}: " + "; ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self) | {"message": self.message}


@dataclass(frozen=True, kw_only=True, slots=True)
class FairnessReport:
    fair: bool
    checked_runs: int
    findings: tuple[Finding, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.field for f in self.findings))

    def to_dict(self) -> dict:
        return {"fair": self.fair, "checked_runs": self.checked_runs, "fields": list(self.fields),
                "findings": [f.to_dict() for f in self.findings]}


def check_fairness(runs: list[RunRecord], results: dict[str, ResultRecord]) -> FairnessReport:
    train = [r for r in runs if r.kind == "train"]
    findings: list[Finding] = []

    def same(field: str, scope: str, items: list[tuple[Any, RunRecord]]) -> None:
        values: dict[str, list[str]] = defaultdict(list)
        for value, run in items:
            values[value if isinstance(value, str) else canonical_json(value)].append(run.run_id[:10])
        if len(values) > 1:
            findings.append(Finding(field=field, scope=scope, values=dict(values)))

    same("data", "study", [(run_data(r.config), r) for r in train])
    same("settings", "study", [(run_settings(r.config), r) for r in train])
    same("lr_trials", "study", [(r.lr_trials, r) for r in train])
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    for r in train:
        groups[r.group].append(r)
    for group, members in groups.items():
        scope = f"group {group!r}"
        same("tokens", scope, [(run_tokens(r.config), r) for r in members])
        trained = [(results[r.run_id].tokens, r) for r in members
                   if r.status == "completed" and r.run_id in results and results[r.run_id].tokens is not None]
        same("tokens", scope + " (trained)", trained)
        per_shape: dict[str, list[RunRecord]] = defaultdict(list)
        for r in members:
            per_shape[r.shape_label].append(r)
        same("seeds", scope, [(sorted({m.seed for m in rs}), rs[0]) for rs in per_shape.values()])
        counts = []
        for rs in per_shape.values():
            by_seed: dict[int | None, set[float | None]] = defaultdict(set)
            for m in rs:
                by_seed[m.seed].add(m.lr)
            counts += [(len(lrs), next(m for m in rs if m.seed == seed)) for seed, lrs in by_seed.items()]
        same("lr_trials", scope + " (stored trials)", counts)
        for seed in sorted({r.seed for r in members}):
            done = [(results[r.run_id].batch_stream_hash, r) for r in members
                    if r.seed == seed and r.status == "completed" and r.run_id in results
                    and results[r.run_id].batch_stream_hash]
            same("batch_stream_hash", f"{scope} seed {seed}", done)
    return FairnessReport(fair=not findings, checked_runs=len(train), findings=tuple(findings))


__all__ = ["FIELDS", "FairnessReport", "Finding", "check_fairness"]
