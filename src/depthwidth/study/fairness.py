"""Is a study's comparison fair? Checked from what is stored, so a study that was edited, mixed or
tampered with is caught after the fact.

Over the training runs the current spec asks for:
- data: the same corpus (content hash), tokenizer, split and batch geometry for every run;
- settings: the same training settings apart from the learning rate (warmup, schedule, betas, dtype, ...);
- tokens: the same token budget within each budget group - in the configs and in what the results say
  was trained; in an equal-time group (`depthwidth.study.timebudget`) instead the same predicted time
  (seconds, hardware and source), each run trained on the tokens its share says;
- batch_stream_hash: the same batch stream (data order) within each (group, seed), over completed runs;
- lr_trials: the same declared number of learning-rate trials for every shape, and, by the group's
  learning-rate mode (`depthwidth.study.lr_search`):
    grid     the same number of stored trials per (group, shape, seed);
    bracket  no shape beyond the shared max_trials, and the same number once nothing is pending;
    transfer the proxy within max_trials and every other shape at one learning rate;
- lr (transfer): every shape other than the proxy at the same learning rate, one the proxy tried;
- seeds: the same seeds for every shape of a group.
- device: every completed run trained on the same kind of device (cpu or cuda), so speeds compare.
- re-tuned groups (`[lr] verify = "adapt"`, `depthwidth.study.verify`): a re-tune's runs are results, so they
  join the data, settings, tokens and data-order checks; every shape of a re-tuned group the same number of
  re-tuned learning rates within the budget its runs record (not compared with shapes of other groups);
- settings allow the study's factor (`[train] parametrization = [...]`) to differ between groups, not
  within one.
A finding names the field, where it differs, and which runs hold which value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from depthwidth.serial import Serializable, hook
from depthwidth.study.lr_search import GroupMode
from depthwidth.study.run_config import canonical_json, run_data, run_settings, run_tokens
from depthwidth.study.spec_train import FACTORS
from depthwidth.study.store import ResultRecord, RunRecord
from depthwidth.study.verify import adapt_trial_counts, is_adapt, is_verify

FIELDS = ("data", "settings", "tokens", "time", "batch_stream_hash", "lr_trials", "lr", "seeds", "device")


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding(Serializable):
    field: str  # one of FIELDS
    scope: str  # "study", "group 'P500k'", "group 'P500k' seed 0"
    #: value (as text) -> short ids of the runs holding it
    values: dict[str, list[str]] = _field(metadata=hook(followed_by=("message",)))

    @property
    def message(self) -> str:
        parts = [f"{value} ({len(ids)} run{'s' if len(ids) != 1 else ''}: {', '.join(ids[:3])}"
                 f"{', ...' if len(ids) > 3 else ''})" for value, ids in self.values.items()]
        return f"{self.field} differs within {self.scope}: " + "; ".join(parts)


@dataclass(frozen=True, kw_only=True, slots=True)
class FairnessReport(Serializable):
    fair: bool
    checked_runs: int = _field(metadata=hook(followed_by=("fields",)))
    findings: tuple[Finding, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.field for f in self.findings))


def check_fairness(runs: list[RunRecord], results: dict[str, ResultRecord], *,
                   modes: dict[str, GroupMode] | None = None) -> FairnessReport:
    """The findings over `runs`; `modes` (group -> GroupMode) default to the grid for every group."""
    train = [r for r in runs if r.kind == "train" and not is_verify(r)]  # transfer checks are not results
    retune = [r for r in runs if r.kind == "train" and is_adapt(r)]  # ... but a re-tune's runs may be
    measured = train + retune
    modes = modes or {}
    findings: list[Finding] = []

    def same(field: str, scope: str, items: list[tuple[Any, RunRecord]]) -> None:
        values: dict[str, list[str]] = defaultdict(list)
        for value, run in items:
            values[value if isinstance(value, str) else canonical_json(value)].append(run.run_id[:10])
        if len(values) > 1:
            findings.append(Finding(field=field, scope=scope, values=dict(values)))

    same("data", "study", [(run_data(r.config), r) for r in measured])
    same("settings", "study", [({k: v for k, v in run_settings(r.config).items() if k not in FACTORS}, r)
                               for r in measured])
    same("lr_trials", "study", [(r.lr_trials, r) for r in train])
    same("device", "study", [(device_kind(results[r.run_id].data.get("device")), r) for r in train
                             if r.status == "completed" and r.run_id in results])
    groups: dict[str, list[RunRecord]] = defaultdict(list)
    retuned: dict[str, list[RunRecord]] = defaultdict(list)
    for r in train:
        groups[r.group].append(r)
    for r in retune:
        retuned[r.group].append(r)
    _retune_counts(findings, same, retune)
    for group, trials in groups.items():
        members = trials + retuned.get(group, [])  # for what every result shares: tokens, data order
        scope = f"group {group!r}"
        if any(k in FACTORS for k in {k for r in train for k in run_settings(r.config)}):
            same("settings", scope, [(run_settings(r.config), r) for r in members])
        timed = [r for r in members if "budget" in r.config]
        if timed:  # an equal-time group: the same predicted time, each shape its own tokens
            same("time", scope, [(_time_budget(r.config), r) for r in members])
            wrong = [r for r in timed if r.status == "completed" and r.run_id in results
                     and results[r.run_id].tokens not in (None, r.config["budget"]["tokens"])]
            if wrong:
                findings.append(Finding(field="tokens", scope=scope + " (trained, against the time budget)",
                                        values={str(results[r.run_id].tokens): [r.run_id[:10]] for r in wrong}))
        else:
            same("tokens", scope, [(run_tokens(r.config), r) for r in members])
            trained = [(results[r.run_id].tokens, r) for r in members
                       if r.status == "completed" and r.run_id in results and results[r.run_id].tokens is not None]
            same("tokens", scope + " (trained)", trained)
        per_shape: dict[str, list[RunRecord]] = defaultdict(list)
        for r in trials:
            per_shape[r.shape_label].append(r)
        same("seeds", scope, [(sorted({m.seed for m in rs}), rs[0]) for rs in per_shape.values()])
        mode = modes.get(group)
        proxy_lrs = None
        if mode is not None and mode.proxy_group is not None:  # the proxy is at another scale: its trials there
            proxy_lrs = {r.lr for r in groups.get(mode.proxy_group, []) if r.shape_label == mode.proxy}
        _trial_counts(findings, same, scope, per_shape, mode, proxy_lrs=proxy_lrs)
        # the stream is a pure function of (data, seed, step): in an equal-time group a shorter run reads a
        # prefix of a longer one's, so hashes (of the whole stream read) compare among runs of one length
        lengths = sorted({run_tokens(r.config) or 0 for r in members}) if timed else [None]
        for seed in sorted({r.seed for r in members}):
            for length in lengths:
                done = [(results[r.run_id].batch_stream_hash, r) for r in members
                        if r.seed == seed and r.status == "completed" and r.run_id in results
                        and results[r.run_id].batch_stream_hash and length in (None, run_tokens(r.config) or 0)]
                tail = f" at {length:,} tokens" if length is not None else ""
                same("batch_stream_hash", f"{scope} seed {seed}{tail}", done)
    return FairnessReport(fair=not findings, checked_runs=len(train), findings=tuple(findings))


def _time_budget(config: dict) -> dict | None:
    """What an equal-time run's tokens were derived from: its seconds and where they were predicted."""
    budget = config.get("budget")
    return None if budget is None else {k: budget.get(k) for k in ("seconds", "hardware", "source")}


def device_kind(device: Any) -> str:
    """What a run trained on, for comparing speeds: "cpu" or "cuda" (the GPU index does not matter)."""
    return str(device or "cpu").partition(":")[0]


def _retune_counts(findings: list[Finding], same, retune: list[RunRecord]) -> None:
    """`[lr] verify = "adapt"` (`depthwidth.study.verify`): in each re-tuned group, no shape beyond the re-tune
    budget its runs record, and, once none is pending, the same number of re-tuned LRs for every shape. Shapes
    of other groups (with no re-tune, or another) are not compared with them."""
    counts = adapt_trial_counts(retune)
    for group, by_shape in counts.items():
        scope = f"group {group!r} (re-tuned)"
        over = {f"{n} > adapt_trials={budget}": [r.run_id[:10] for r in retune if r.group == group
                                                  and r.shape_label == label]
                for label, (n, budget) in by_shape.items() if n > budget}
        if over:
            findings.append(Finding(field="lr_trials", scope=scope + " (over the re-tune budget)", values=over))
        members = [r for r in retune if r.group == group]
        if all(r.status not in ("pending", "running") for r in members):
            first = {label: next(r for r in members if r.shape_label == label) for label in by_shape}
            same("lr_trials", scope, [(f"{n} of {budget}", first[label]) for label, (n, budget) in by_shape.items()])


def _trial_counts(findings: list[Finding], same, scope: str, per_shape: dict[str, list[RunRecord]],
                  mode: GroupMode | None, *, proxy_lrs: set | None = None) -> None:
    """The learning-rate trials of a group's shapes, as its mode says they must be."""
    kind = mode.kind if mode is not None else "grid"
    counts, over = [], defaultdict(list)
    for label, rs in per_shape.items():
        if kind == "transfer" and label != mode.proxy:
            continue
        by_seed: dict[int | None, set[float | None]] = defaultdict(set)
        for m in rs:
            if kind != "transfer" or m.seed in mode.seeds:
                by_seed[m.seed].add(m.lr)
        for seed, lrs in by_seed.items():
            first = next(m for m in rs if m.seed == seed)
            counts.append((len(lrs), first))
            if kind != "grid" and len(lrs) > mode.max_trials:
                over[f"{len(lrs)} > max_trials={mode.max_trials}"].append(first.run_id[:10])
    if over:
        findings.append(Finding(field="lr_trials", scope=scope + " (over the search budget)", values=dict(over)))
    settled = all(m.status not in ("pending", "running") for rs in per_shape.values() for m in rs)
    if kind == "grid" or (kind == "bracket" and settled):
        same("lr_trials", scope + " (stored trials)", counts)
    if kind == "transfer":
        others = [m for label, rs in per_shape.items() if label != mode.proxy for m in rs]
        same("lr", scope + " (transferred)", [(m.lr, m) for m in others])
        tried = proxy_lrs if proxy_lrs is not None else {m.lr for m in per_shape.get(mode.proxy, [])}
        stray = [m for m in others if m.lr not in tried]
        if stray:
            findings.append(Finding(field="lr", scope=scope + f" (not tried by the proxy {mode.proxy})",
                                    values={f"{stray[0].lr:.4g}": [m.run_id[:10] for m in stray]}))


__all__ = ["FIELDS", "FairnessReport", "Finding", "check_fairness"]
