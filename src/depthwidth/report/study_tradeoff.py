"""The seeds' trade-off picture for each budget group of a study, drawn by the planner's own
`present.plan_plot.plot_plan` (budget curve L ~ 1/H^2, per-layer memory against sequential depth, decode
latency against memory) for the shapes the study actually trained.

A group is drawn only when its members have equal non-embedding parameters within `TOLERANCE` of
their median (an iso-parameter family); the family handed to `plot_plan` then has that median as its
target, so the exact budget curve passes through the members. Other groups (explicit shapes of
unrelated sizes) are skipped with the reason. A study whose runs used tensor parallelism (tp > 1) adds the
panel "communication per token against depth" (`report.comm_plots`) after the groups' pictures.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from depthwidth.report.rows import StudyData
from depthwidth.report.study_plots import Figure

TOLERANCE = 0.10


def plot_tradeoffs(study: StudyData, out: Path, *, hardware, dtype: str = "bf16") -> tuple[list[Figure], list[str]]:
    """(figures, skipped reasons), one figure per iso-parameter group on `hardware` (a name or a
    `HardwareSpec`)."""
    from depthwidth.present.plan_plot import plot_plan
    from depthwidth.shapes.evaluate import PlanResult, Workload, evaluate_shape, pareto_front
    from depthwidth.shapes.families import Family, FamilyMember
    from depthwidth.shapes.hardware import get_hardware

    hw = get_hardware(hardware)
    seq_len = study.protocol.seq_len or None
    figures, skipped = [], []
    for group in study.groups:
        rows = sorted((r for r in study.results if r.group == group), key=lambda r: -r.n_layers)
        if len(rows) < 2:
            skipped.append(f"{group}: fewer than 2 shapes, no trade-off to draw")
            continue
        target = statistics.median(r.non_embedding_params for r in rows)
        errors = [(r.non_embedding_params - target) / target for r in rows]
        if max(abs(e) for e in errors) > TOLERANCE:
            skipped.append(f"{group}: shapes differ by more than {TOLERANCE:.0%} in non-embedding parameters, "
                           "not an equal-parameter family")
            continue
        heads = {r.shape.head_dim for r in rows}
        members = tuple(FamilyMember(shape=r.shape, value=float(r.non_embedding_params), error=e, params=r.params,
                                     non_embedding_params=r.non_embedding_params, exact_depth=float(r.n_layers))
                        for r, e in zip(rows, errors))
        workload = Workload(seq_len=seq_len or rows[0].shape.max_seq_len, batch=max(1, study.protocol.batch_size),
                            dtype=dtype)
        family = Family(kind="iso-params", target=float(target), target_name="non_embedding_params",
                        tolerance=max(abs(e) for e in errors) or 0.01, align=min(heads), head_dim=min(heads),
                        seq_len=workload.seq_len, members=members, base=rows[0].shape, non_embedding=True)
        evaluations = tuple(evaluate_shape(m.shape, hardware=hw, workload=workload) for m in members)
        points = [(e.decode.total_s, float(e.summary.memory.total_training_bytes)) for e in evaluations]
        result = PlanResult(family=family, evaluations=evaluations, pareto=tuple(pareto_front(points)),
                            workload=workload, hardware=hw)
        name = f"tradeoff_{_slug(group)}"
        out.mkdir(parents=True, exist_ok=True)
        png, svg = out / f"{name}.png", out / f"{name}.svg"
        plot_plan(result, png)
        plot_plan(result, svg)
        figures.append(Figure(name=name, title=f"Trade-off picture: {group}",
                              caption=f"{group} on {hw.name}: deep-narrow shapes hold less memory per layer but walk "
                                      "a longer sequential path; shallow-wide the opposite (predicted).",
                              png=png, svg=svg))
    from depthwidth.report.comm_plots import plot_comm

    comm = plot_comm(study, out)
    if comm is not None:
        figures.append(comm)
    return figures, skipped


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:40] or "group"


__all__ = ["plot_tradeoffs", "TOLERANCE"]
