"""The "does a model use its depth?" panel of a study report ([inspect], `depthwidth.study.inspections`): per
budget group, each shape's drop-a-layer profile and logit-lens curve against relative depth, and its
effective depth against its nominal depth; under it, what that shows in words.

Block l of L sits at relative depth (l + 1) / L, where its output is (the last block at 1). The drop-a-layer
profile is the loss increase when that block is skipped, the logit lens the loss of the final norm and head
applied to its output (at 1 it is the model's loss), the effective depth the blocks a greedy removal keeps
within the inspection's tolerance (`depthwidth.diagnose.layers`). Lad et al. 2024 (arXiv 2406.19384) find
the first and last layers of trained LMs fragile and the middle robust; the words say, per shape, where its
most and least fragile blocks are and whether its two ends are its two most fragile blocks.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.present.figures import pyplot
from depthwidth.report.rows import StudyData
from depthwidth.report.study_plots import Figure, _save
from depthwidth.study.summary import ShapeResult


def inspected(study: StudyData) -> list[ShapeResult]:
    return [r for r in study.results if r.inspection]


def _depths(n_layers: int) -> list[float]:
    return [(i + 1) / n_layers for i in range(n_layers)]


def plot_inspection(study: StudyData, out: Path) -> Figure | None:
    rows = inspected(study)
    if not rows:
        return None
    plt = pyplot()
    groups = [g for g in study.groups if any(r.group == g for r in rows)]
    fig, axes = plt.subplots(len(groups), 3, figsize=(14.5, 3.9 * len(groups)), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for (drop_ax, lens_ax, eff_ax), group in zip(axes, groups):
        pts = sorted((r for r in rows if r.group == group), key=lambda r: r.n_layers)
        tolerance = pts[0].inspect_tolerance
        for i, r in enumerate(pts):
            data, color = r.inspection, cmap(i / max(1, len(pts) - 1))
            x = _depths(data["n_layers"])
            drop_ax.plot(x, data["drop_increase"], "o-", color=color, label=r.shape_label)
            lens_ax.plot(x, data["lens_loss"], "s-", color=color, label=r.shape_label)
            lens_ax.plot([1.0], [data["loss"]], "*", color=color, ms=11)
        drop_ax.set_yscale("symlog", linthresh=max(tolerance or 0.01, 1e-3))
        drop_ax.axhline(0.0, color="grey", lw=0.5)
        if tolerance:
            drop_ax.axhline(tolerance, color="grey", lw=0.8, ls=":", label=f"tolerance {tolerance:g}")
        drop_ax.set_title(f"{group}: loss increase with one block skipped")
        drop_ax.set_ylabel("nats per token (symlog)")
        lens_ax.set_title(f"{group}: logit lens (star: the model's loss)")
        lens_ax.set_ylabel("loss of the head on block l's output (nats)")
        for ax in (drop_ax, lens_ax):
            ax.set_xlabel("relative depth (l + 1) / L")
            ax.set_xlim(0.0, 1.05)
            ax.grid(True, alpha=0.25)
            ax.legend(fontsize=7, loc="best")
        nominal = [r.n_layers for r in pts]
        top = max(nominal) + 0.5
        eff_ax.plot([0, top], [0, top], color="grey", lw=0.8, ls="--", label="effective = nominal")
        eff_ax.plot(nominal, [r.effective_depth for r in pts], "o", color="C3", ms=7)
        for r in pts:
            eff_ax.annotate(r.shape_label, (r.n_layers, r.effective_depth), textcoords="offset points",
                            xytext=(5, -10), fontsize=7)
        eff_ax.set_xlim(0, top)
        eff_ax.set_ylim(-0.3, top)
        eff_ax.set_xlabel("nominal depth L")
        eff_ax.set_ylabel("effective depth (blocks kept)")
        eff_ax.set_title(f"{group}: effective depth within {tolerance:g} nats" if tolerance is not None else group)
        eff_ax.grid(True, alpha=0.25)
        eff_ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Does a model use its depth?")
    caption = ("Per shape (its first seed at the chosen learning rate, on its own validation windows): the loss "
               "increase when one block is skipped and the logit-lens loss at each block's output, against "
               "relative depth, and the blocks a greedy removal keeps within the tolerance against the nominal "
               "depth. A block whose removal costs little does little the others do not.")
    return _save(fig, out, "inspect", "Does a model use its depth?", " ".join([caption, *inspect_verdict(study)]))


def _where(i: int, n_layers: int) -> str:
    if i == 0:
        return "the first"
    if i == n_layers - 1:
        return "the last"
    return f"block {i} (at {(i + 1) / n_layers:.2f} of the depth)"


def fragile_ends(drop: list[float]) -> bool | None:
    """Whether the first and the last block are the two most fragile (each costs more to skip than every
    middle block); None below 3 blocks."""
    if len(drop) < 3:
        return None
    return min(drop[0], drop[-1]) > max(drop[1:-1])


def _lens_halfway(data: dict) -> tuple[float, float]:
    """(relative depth, lens loss above the model's) of the block nearest half depth."""
    L = data["n_layers"]
    i = min(range(L), key=lambda j: (abs((j + 1) / L - 0.5), j))
    return (i + 1) / L, data["lens_loss"][i] - data["loss"]


def inspect_verdict(study: StudyData) -> list[str]:
    """Sentences per budget group: each shape's effective depth, its most and least fragile block, how far the
    logit lens is from the model's loss at half depth; then how many shapes show Lad et al.'s fragile ends."""
    rows = inspected(study)
    out = []
    multi = len({r.group for r in rows}) > 1
    for group in study.groups:
        pts = sorted((r for r in rows if r.group == group), key=lambda r: r.n_layers)
        if not pts:
            continue
        where = f" ({group})" if multi else ""
        parts = []
        for r in pts:
            data = r.inspection
            L, drop = data["n_layers"], data["drop_increase"]
            depth, gap = _lens_halfway(data)
            text = f"{r.shape_label}: effective depth {r.effective_depth} of {L}"
            if L > 1:
                most, least = r.most_important_block, r.least_important_block
                text += (f", most fragile {_where(most, L)} ({drop[most]:+.3f} nats), least {_where(least, L)} "
                         f"({drop[least]:+.3f})")
            parts.append(text + f", logit lens {gap:+.2f} nats from the final loss at {depth:.2f} of the depth")
        tol = pts[0].inspect_tolerance
        out.append(f"Within {tol:g} nats{where}: " + "; ".join(parts) + ".")
        judged = [(r, fragile_ends(r.inspection["drop_increase"])) for r in pts]
        judged = [(r, v) for r, v in judged if v is not None]
        if judged:
            ends = [r.shape_label for r, v in judged if v]
            first = [r.shape_label for r, _ in judged if r.most_important_block == 0]
            out.append(f"The two ends are the most fragile blocks (Lad et al.'s pattern){where} in {len(ends)} of "
                       f"{len(judged)} shapes with 3 or more blocks" + (f" ({', '.join(ends)})" if ends else "")
                       + f"; the first block is the most fragile in {len(first)} of them.")
    return out


__all__ = ["fragile_ends", "inspect_verdict", "inspected", "plot_inspection"]
