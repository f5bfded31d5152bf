"""The "what depth buys / what width buys" panel: probe accuracy against d_model/n_layers, one line
per difficulty (and budget), next to the natural-text slices' losses against the same axis.

Depth-hungry probes (multi-hop composition, addition, parity) should rise to the left (deep and
narrow); capacity-hungry ones (associative recall, memorised facts) to the right, if the family's
shapes differ in what they can do at all. A flat panel is a result too.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.data.probes import KINDS
from depthwidth.report.rows import StudyData
from depthwidth.present.figures import pyplot
from depthwidth.report.study_plots import Figure, _save


def plot_probes(study: StudyData, out: Path) -> Figure | None:
    rows = [r for r in study.results if r.probe_accuracy]
    if not rows:
        return None
    plt = pyplot()
    probes = sorted({p for r in rows for p in r.probe_accuracy}, key=lambda p: (KINDS.get(p, "~"), p))
    text_slices = sorted({s for r in study.results for s in r.slice_losses if not s.startswith("probe:")})
    panels = len(probes) + (1 if text_slices else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.4), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, probe in zip(axes[0], probes):
        difficulties = sorted({d for r in rows for d in r.probe_accuracy.get(probe, {})}, key=int)
        cmap = plt.get_cmap("viridis")
        for gi, group in enumerate(study.groups):
            pts = sorted((r for r in rows if r.group == group and probe in r.probe_accuracy),
                         key=lambda r: r.aspect_ratio)
            for di, d in enumerate(difficulties):
                xy = [(r.aspect_ratio, r.probe_accuracy[probe][d]) for r in pts if d in r.probe_accuracy[probe]]
                if not xy:
                    continue
                label = f"{d}" + (f" ({group})" if len(study.groups) > 1 else "")
                ax.plot(*zip(*xy), marker="o", ls=styles[gi % len(styles)],
                        color=cmap(di / max(1, len(difficulties) - 1)), label=label)
            for r in pts:
                ax.annotate(f"L{r.n_layers}", (r.aspect_ratio, 1.0), fontsize=7, ha="center", va="bottom",
                            color="0.4")
        kind = KINDS.get(probe)
        ax.set_title(f"{probe} ({kind}-hungry)" if kind else probe)
        ax.set_ylim(-0.03, 1.08)
        ax.set_ylabel("exact-match accuracy (held-out)")
        ax.legend(title="difficulty", fontsize=7, loc="best")
    if text_slices:
        ax = axes[0][-1]
        colors = plt.get_cmap("tab10")
        for si, s in enumerate(text_slices):
            for gi, group in enumerate(study.groups):
                pts = sorted((r for r in study.results if r.group == group and s in r.slice_losses),
                             key=lambda r: r.aspect_ratio)
                if pts:
                    ax.plot([r.aspect_ratio for r in pts], [r.slice_losses[s] for r in pts], marker="o",
                            ls=styles[gi % len(styles)], color=colors(si % 10),
                            label=s + (f" ({group})" if len(study.groups) > 1 else ""))
        ax.set_title("natural-text slices")
        ax.set_ylabel("validation loss (nats/token)")
        ax.legend(fontsize=7, loc="best")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("d_model / n_layers (left = deep)")
        ax.grid(True, which="both", alpha=0.25)
    fig.suptitle("What depth buys / what width buys")
    return _save(fig, out, "probes", "What depth buys / what width buys",
                 "Probe accuracy by difficulty against aspect ratio at equal parameters, beside the loss "
                 "of natural-text slices. Depth-hungry probes should favour the left, capacity-hungry ones "
                 "the right; a flat panel means this budget does not separate them.")


__all__ = ["plot_probes"]
