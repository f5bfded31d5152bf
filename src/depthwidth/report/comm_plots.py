"""Communication per token against depth, the trade-off picture's panel for tensor parallelism.

Drawn when some shape of the study trained with tp > 1 (`ShapeResult.comm_tp`): per budget group, the
bytes one rank sends in collectives per trained token against n_layers, measured (filled markers) with
the analytic prediction (`depthwidth.shapes.collectives`, open markers on a dashed line), and the same for
the time when it was measured. At equal parameters a deeper shape is narrower, but tensor parallelism
all-reduces (2 + 2 or 3) x d_model activations per layer and token, so L x d_model grows with depth.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.present.figures import pyplot
from depthwidth.present.units import duration, nbytes
from depthwidth.report.rows import StudyData
from depthwidth.report.study_plots import Figure, _group_colors, _save

NAME = "comm_per_token"


def tp_rows(study: StudyData) -> list:
    """The shapes that measured tensor-parallel communication."""
    return [r for r in study.results if (r.comm_tp or 1) > 1 and r.comm_bytes_per_token is not None]


def plot_comm(study: StudyData, out: Path) -> Figure | None:
    """Communication per token against depth, one line per budget group; None without tp > 1 runs."""
    rows = tp_rows(study)
    if not rows:
        return None
    plt = pyplot()
    timed = any(r.comm_seconds_per_token is not None for r in rows)
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(9 if timed else 5, 3.6), squeeze=False)
    colors = _group_colors(study.groups)
    panels = [("comm_bytes_per_token", "predicted_comm_bytes_per_token", "bytes per token (one rank)", nbytes, 2)]
    if timed:
        panels.append(("comm_seconds_per_token", "predicted_comm_seconds_per_token", "time per token", duration, 10))
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for ax, (measured, predicted, label, unit, base) in zip(axes[0], panels, strict=True):
        for g in study.groups:
            pts = sorted((r for r in rows if r.group == g), key=lambda r: r.n_layers)
            if not pts:
                continue
            xs = [r.n_layers for r in pts]
            pred = [(r.n_layers, getattr(r, predicted)) for r in pts if getattr(r, predicted) is not None]
            if pred:
                ax.plot(*zip(*pred, strict=True), "o--", ms=10, mfc="none", color=colors[g], label=f"{g} predicted")
            ax.plot(xs, [getattr(r, measured) for r in pts], "o-", ms=5, color=colors[g], label=f"{g} measured")
        ax.set_xlabel("n_layers (depth)")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sorted({r.n_layers for r in rows}))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(base=base, subs=(1.0,) if base == 2 else (1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _, unit=unit: unit(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    tp = sorted({r.comm_tp for r in rows})
    title = f"Communication per token against depth (tp {', '.join(map(str, tp))})"
    fig.suptitle(title, fontsize=10)
    return _save(fig, out, NAME, title,
                 "Tensor-parallel collectives per trained token: measured (filled) and predicted (open) by "
                 "depth; at equal parameters the deeper shape all-reduces more activation bytes per token.")


__all__ = ["NAME", "plot_comm", "tp_rows"]
