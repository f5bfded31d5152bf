"""The shape-aware law of a study: its points, the model selection between the forms of
`report.fit_shape`, the chosen form's fit and the prescription at a target scale (`report.prescribe`).
`recommend --target-params` and the report's panel (`report.shape_panel`) both call `shape_law`.

The report's target, when none is given (`default_target`): 10x the largest measured model's total
parameters, at the tokens per parameter of that model's longest run, so the panel always shows how far
the data carry and says it is an extrapolation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from depthwidth.errors import UserError
from depthwidth.report.gates import fit_results, rules_of
from depthwidth.report.fit_select import FormSelection, select_form
from depthwidth.report.fit_shape import FORM_CHOICES, LawPoint, ShapeLawFit, fit_shape_law
from depthwidth.report.prescribe import Limits, Prescription, Target, candidates, law_points, prescribe
from depthwidth.report.rows import StudyData
from depthwidth.serial import Serializable, hook

TARGET_FACTOR = 10.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Planner(Serializable):
    """The grid the prescription's candidates are built on (`shapes.families.plan_family`)."""

    align: int = 64
    head_dim: int = 64
    tp: int = 1
    min_layers: int = 2
    aspect_range: tuple[float, float] = (4.0, 512.0)
    tolerance: float = 0.05


@dataclass(frozen=True, kw_only=True, slots=True)
class ShapeLaw(Serializable):
    n_points: int
    selection: FormSelection | None
    fit: ShapeLawFit | None
    prescription: Prescription | None
    planner: Planner
    skipped: str | None = None  # why there is no fit or no prescription
    imported: dict[str, Any] | None = None  # the study's import record (`study.imported.imported_info`)
    points: tuple[LawPoint, ...] = field(default=(), metadata=hook(skip=True))


def study_planner(study: StudyData) -> Planner:
    """The study's own grid: its head size and widths on multiples of it (for the report's panel)."""
    shapes = [r.shape for r in study.results]
    head = min((s.head_dim for s in shapes), default=64)
    return Planner(align=head, head_dim=head, min_layers=min((s.n_layers for s in shapes), default=2))


def default_target(study: StudyData, *, factor: float = TARGET_FACTOR) -> Target:
    rows = [r for r in study.results if r.val_loss is not None and r.tokens]
    if not rows:
        raise UserError("no completed run: no scale to extrapolate from")
    top = max(rows, key=lambda r: (r.params, r.tokens))
    seq = study.protocol.seq_len or top.shape.max_seq_len
    return Target(params=factor * top.params, tokens=factor * top.tokens, seq_len=seq)


def base_shape(study: StudyData):
    """The conventions the candidates take: those of the study's largest shape."""
    rows = [r for r in study.results if r.val_loss is not None]
    if not rows:
        raise UserError("no completed run: no shape conventions to plan with")
    return max(rows, key=lambda r: r.params).shape


def shape_law(study: StudyData, *, target: Target | None = None, limits: Limits | None = None, form: str = "auto",
              planner: Planner | None = None, n_bootstrap: int = 200, level: float = 0.95, seed: int = 0,
              n_splits: int = 20) -> ShapeLaw:
    """Select a form (or take `form`), fit it with bootstrap intervals and prescribe at `target`
    (default: `default_target`). A study too small for any form is a ShapeLaw with `skipped` set."""
    from depthwidth.study.imported import imported_info

    if form not in FORM_CHOICES:
        raise UserError(f"form={form!r} is not allowed; expected one of {', '.join(FORM_CHOICES)}")
    fit_rows, left_out = fit_results(study.results, rules_of(study.spec))  # the validity gates (report.gates)
    points = law_points(fit_rows)
    if not points and left_out:
        planner = planner or study_planner(study)
        return ShapeLaw(n_points=0, planner=planner, selection=None, fit=None, prescription=None,
                        imported=imported_info(study.folder) if study.folder else None,
                        skipped="no point passes the validity gates: " + "; ".join(left_out))
    imported = imported_info(study.folder) if study.folder else None
    planner = planner or study_planner(study)
    base = dict(n_points=len(points), planner=planner, imported=imported, points=tuple(points))
    selection = None
    try:
        selection = select_form(points, n_splits=n_splits, seed=seed)
    except UserError as exc:
        if form == "auto":
            return ShapeLaw(**base, selection=None, fit=None, prescription=None, skipped=str(exc))
    chosen = form if form != "auto" else selection.best
    if chosen is None:
        return ShapeLaw(**base, selection=selection, fit=None, prescription=None,
                        skipped="no form could be fitted: " + selection.line)
    try:
        init = next((s.fit for s in selection.scores if s.form == chosen), None) if selection else None
        fit = fit_shape_law(points, form=chosen, n_bootstrap=n_bootstrap, level=level, seed=seed, init=init)
    except UserError as exc:
        return ShapeLaw(**base, selection=selection, fit=None, prescription=None, skipped=str(exc))
    target = target or default_target(study)
    try:
        members = candidates(base=base_shape(study), target=target, align=planner.align, head_dim=planner.head_dim,
                             tp=planner.tp, min_layers=planner.min_layers, aspect_range=planner.aspect_range,
                             tolerance=planner.tolerance)
        pres = prescribe(fit, members=members, target=target, limits=limits or Limits())
    except UserError as exc:  # the planner builds nothing at the target, or the hardware row is unknown
        return ShapeLaw(**base, selection=selection, fit=fit, prescription=None, skipped=f"no prescription: {exc}")
    return ShapeLaw(**base, selection=selection, fit=fit, prescription=pres)


def nearest_scales(points: list[LawPoint], *, n: int = 2) -> list[tuple[float, float, list[LawPoint]]]:
    """The `n` largest measured scales as (median N, its longest tokens, the points at those tokens)."""
    from depthwidth.report.trends import SCALE_RATIO

    groups: list[list[LawPoint]] = []
    for p in sorted(points, key=lambda p: p.params):
        if groups and p.params <= groups[-1][0].params * SCALE_RATIO:
            groups[-1].append(p)
        else:
            groups.append([p])
    out = []
    for g in groups[-n:]:
        tokens = max(p.tokens for p in g)
        at = [p for p in g if math.isclose(p.tokens, tokens, rel_tol=1e-6)]
        ns = sorted(p.params for p in at)
        out.append((ns[len(ns) // 2], tokens, at))
    return out


__all__ = ["Planner", "ShapeLaw", "base_shape", "default_target", "nearest_scales", "shape_law",
           "study_planner"]
