"""The report's "verdict stability" panel (`report.stability`): decision accuracy of every proxy against its
fraction of the target's compute (log), one marker per proxy (a circle for a shorter horizon, a square for a
smaller scale) with its bootstrap interval, a colour per ladder, and DataDecide's reference at 80% of pairs;
and its HTML: one sentence per proxy and per ladder."""

from __future__ import annotations

from html import escape
from pathlib import Path

from depthwidth.present.figures import plain_log_ticks, pyplot
from depthwidth.report.stability import DATADECIDE_ACCURACY, Stability
from depthwidth.report.study_plots import Figure, _save

NAME = "stability"
REFERENCE = "DataDecide: ~80% of pairs at <2% of the compute"
MARKERS = {"horizon": "o", "scale": "s"}


def _plotted(stab: Stability | None) -> list:
    if stab is None:
        return []
    return [a for a in stab.agreements if a.accuracy is not None and a.fraction_of_target_compute]


def plot_stability(stab: Stability | None, out: Path) -> Figure | None:
    points = _plotted(stab)
    if not points:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    colours = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(lad.name for lad in stab.ladders)}
    labelled: set[tuple[str, str]] = set()
    for a in points:
        x, y = a.fraction_of_target_compute, a.accuracy
        yerr = [[y - a.low], [a.high - y]] if a.low is not None else None
        key = (a.ladder, a.kind)
        ax.errorbar([x], [y], yerr=yerr, marker=MARKERS[a.kind], ms=7, capsize=3, ls="none",
                    color=colours.get(a.ladder, "0.3"), label=None if key in labelled else f"{a.ladder}: {a.kind}")
        labelled.add(key)
        ax.annotate(a.proxy, (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.axhline(DATADECIDE_ACCURACY, color="0.4", ls="--", lw=1, label=REFERENCE)
    ax.set_xscale("log")
    xs = [a.fraction_of_target_compute for a in points]
    ax.set_xlim(min(xs) / 2, max(1.0, max(xs) * 1.5))
    plain_log_ticks(ax)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel("proxy's model training FLOPs / the target's (log scale)")
    ax.set_ylabel("decision accuracy (share of pairs ordered as the target)")
    ax.set_title("Does a cheaper run order the shapes as the target does?")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8)
    caption = ("Each marker is a proxy of a ladder's target (its largest scale at the full horizon): a shorter horizon "
               "of the same runs (circle) or a smaller scale matched by aspect-ratio family (square). Decision accuracy "
               "is the share of pairs of shapes it orders as the target does (an exact tie counts as wrong); bars are "
               "a bootstrap over seeds, absent with a single seed. Dashed: DataDecide (Magnusson et al. 2025).")
    return _save(fig, out, NAME, "Verdict stability", caption)


def stability_html(stab: Stability | None, figure: Figure | None = None, *, img=None) -> str:
    """The section's body: the lines of every ladder, then the figure (`img(figure)` draws it inline)."""
    if stab is None:
        return ""
    parts = []
    for lad in stab.ladders:
        lines = [a.line for a in stab.agreements if a.ladder == lad.name]
        parts.append(f"<h3>{escape(lad.name)}</h3><ul>" + "".join(f"<li>{escape(x)}</li>" for x in lines)
                     + f"</ul><p><b>{escape(lad.summary)}</b></p>")
    parts += [f'<p class="muted">{escape(n)}</p>' for n in stab.notes]
    if figure is not None and img is not None:
        parts.append(img(figure))
    parts.append('<p class="muted">Decision accuracy after DataDecide (Magnusson et al. 2025, arXiv 2504.11393), '
                 "who order about 80% of pairs right from runs at under 2% of the target's compute.</p>")
    return "".join(parts)


__all__ = ["NAME", "plot_stability", "stability_html"]
