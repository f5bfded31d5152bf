"""Everything a study report shows, computed (no files written): target-hardware estimates, the
comparison table, trend fits, noise and the recommendation. `report.export.write_report` renders it."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from depthwidth.errors import UserError
from depthwidth.report.gates import fit_results, learned, rules_of
from depthwidth.report.budgets import BudgetRanking, budget_ranking
from depthwidth.report.noise import NoiseEstimate, estimate_noise
from depthwidth.report.recommend import Constraints, Recommendation, recommend
from depthwidth.report.rows import StudyData
from depthwidth.report.shape_law import ShapeLaw, shape_law
from depthwidth.report.stability import Stability, stability
from depthwidth.report.study_tables import Comparison, comparison
from depthwidth.report.targets import STUDY, TargetEstimate, estimate_target, hardware_label, resolve_target
from depthwidth.report.trends import TrendPoint, TrendReport, fit_trends
from depthwidth.report.verdicts import ScaleVerdict, scale_verdicts


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    study: StudyData
    hardware: str
    targets: dict[str, TargetEstimate]
    table: Comparison
    trends: TrendReport
    noise: NoiseEstimate
    recommendation: Recommendation
    shape_law: ShapeLaw | None = None  # the shape-aware law and its prescription (`report.shape_law`)
    budgets: BudgetRanking | None = None  # the ranking against budget (`report.budgets`)
    verdicts: tuple[ScaleVerdict, ...] = ()  # one per full-horizon group (`report.verdicts`)
    stability: Stability | None = None  # decision accuracy of the cheaper proxies (`report.stability`)

    def to_dict(self) -> dict:
        return {"study": self.study.to_dict(), "hardware": self.hardware,
                "targets": {k: v.to_dict() for k, v in self.targets.items()}, "table": self.table.to_dict(),
                "trends": self.trends.to_dict(), "noise": self.noise.to_dict(),
                "recommendation": self.recommendation.to_dict(),
                "shape_law": None if self.shape_law is None else self.shape_law.to_dict(),
                "budgets": None if self.budgets is None else self.budgets.to_dict(),
                "verdicts": [v.to_dict() for v in self.verdicts],
                "stability": None if self.stability is None else self.stability.to_dict()}


def default_hardware(study: StudyData) -> str:
    """The target of the study's own `hardware` (what its spec asked for): that row of the hardware
    table, else STUDY (the study's machine, whose measurements it holds) - for "measured" (the machine
    the study ran on), and for a name no longer in the table."""
    from depthwidth.machine import MEASURED, hardware_choice
    from depthwidth.shapes.hardware import HARDWARE

    try:
        choice = hardware_choice(study.protocol.hardware or MEASURED)
    except UserError:
        return STUDY
    return choice if choice in HARDWARE else STUDY


def trend_points(study: StudyData) -> list[TrendPoint]:
    """The points of the L(N) trends: every full-horizon result (a horizon group, `<group>@<h>`, is the same
    shape at fewer tokens: the ranking against budget reads it) under the study's most common
    parametrization (a side-by-side group under another one is a comparison, not a scale), that the
    validity gates let a fit use (`report.gates.fit_results`: learned, enough tokens per parameter, enough
    scales)."""
    from collections import Counter

    from depthwidth.study.horizons import split_horizon

    fit, _ = fit_results(study.results, rules_of(study.spec))
    full = [r for r in fit if split_horizon(r.group) is None]
    common = Counter(r.parametrization for r in full).most_common(1)
    keep = [r for r in full if common and r.parametrization == common[0][0]]
    return [TrendPoint(label=r.shape_label, aspect_ratio=r.aspect_ratio, n=r.non_embedding_params,
                       d=max(r.tokens or 0, 1), loss=v) for r in keep for v in r.seed_losses if v > 0]


def build_report(
    study: StudyData,
    *,
    hardware: str | None = None,
    constraints: Constraints | None = None,
    n_bootstrap: int = 200,
    seed: int = 0,
) -> Report:
    """Compute the report of `study` for `hardware` (default: the study's). `constraints` default to
    none (the recommendation is then the best loss, judged against noise)."""
    hw = resolve_target(hardware) if hardware else default_hardware(study)
    constraints = constraints or Constraints(hardware=hw)
    p = study.protocol
    targets = {}
    for r in study.results:
        try:
            targets[r.key] = estimate_target(r, hardware=hw, seq_len=p.seq_len or None, batch_size=p.batch_size or 1)
        except ValueError:
            continue  # a bench length beyond the model's table: shown as not available
    noise = estimate_noise(study.results)
    rec = recommend(study.results, constraints, seq_len=p.seq_len or None, batch_size=p.batch_size or 1, noise=noise)
    trends = fit_trends(trend_points(study), n_bootstrap=n_bootstrap, seed=seed,
                        min_scales=rules_of(study.spec).min_scales)
    _, left_out = fit_results(study.results, rules_of(study.spec))
    trends = replace(trends, warnings=tuple(left_out) + trends.warnings)
    table = comparison(study, targets=targets, hardware=hardware_label(hw))
    law = shape_law(study, limits=_law_limits(hw), n_bootstrap=n_bootstrap, seed=seed, n_splits=10) \
        if study.results else None
    budgets = budget_ranking(study.results, seconds_of=_seconds_of(study, hw))
    stab = stability(study.results, learned=learned, n_bootstrap=n_bootstrap, seed=seed)  # the validity gate
    bigram = study.baselines.bigram if study.baselines is not None else None
    return Report(study=study, hardware=hw, targets=targets, table=table, trends=trends, noise=noise,
                  recommendation=rec, shape_law=law, budgets=budgets, stability=stab,
                  verdicts=scale_verdicts(study.results, noise, bigram=bigram))


def _seconds_of(study: StudyData, hw: str):
    """(result, tokens) -> training seconds predicted on the report's hardware (the study's own machine: its
    measured profile), or None when that machine has no profile here."""
    from depthwidth.machine import MEASURED, resolve_hardware
    from depthwidth.study.timebudget import predicted_seconds

    try:
        spec = resolve_hardware(MEASURED if hw == STUDY else hw)
    except UserError:
        return None
    p = study.protocol
    dtype = (study.spec.get("train") or {}).get("dtype", "fp32")

    def seconds(result, tokens: int) -> float | None:
        try:
            return predicted_seconds(result.shape, hardware=spec, tokens=tokens, seq_len=p.seq_len,
                                     batch_size=p.batch_size or 1, dtype=dtype)
        except (UserError, ValueError):
            return None
    return seconds


def _law_limits(hw: str):
    """The prescription's hardware: the report's, unless that is the study's own machine (a target-scale shape
    was never measured there), then the table's H100 row."""
    from depthwidth.report.prescribe import Limits

    return Limits(hardware="h100" if hw == STUDY else hw)


def report_for(study_dir: str | os.PathLike, **kwargs) -> Report:
    """`build_report(load_study(study_dir), **kwargs)`."""
    from depthwidth.report.data import load_study

    return build_report(load_study(study_dir), **kwargs)


__all__ = ["Report", "build_report", "default_hardware", "report_for", "trend_points"]
