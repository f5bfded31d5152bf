"""Plots of a study (matplotlib, Agg backend, imported lazily): each function draws one picture to
`<out>/<name>.png` and `.svg` and returns a `Figure` record (or None when the study has nothing to show).

- basin: validation loss against d_model/n_layers at fixed budget, one line per scale (Kaplan et al.
  2020, figure 5: a wide flat basin);
- curves: validation loss against training tokens, one line per shape and seed;
- lr: validation loss against learning rate, one line per shape and a panel per budget group: the
  chosen LR starred, the interpolated optimum ticked, the lowest and highest LR tried boxed (a star in
  a box is a best LR at the edge of what was tried), diverged trials as crosses at the top;
- pareto_latency / pareto_throughput: loss against batch-1 decode latency on the target hardware and
  against training tokens/s, Pareto-best shapes joined (`shapes.evaluate.pareto_front`);
- slices: loss per evaluation slice and shape;
- latency_check: measured against predicted latency, with the y = x line;
- fits: loss against non-embedding parameters per aspect-ratio family, fitted law, bootstrap band
  and extrapolation (see `report.trends`).
The trade-off picture (per-layer memory against sequential depth) is the planner's
`present.plan_plot.plot_plan`, drawn per budget group in `report.study_tradeoff`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from depthwidth.present.figures import count_ticks, plain_log_ticks, pyplot
from depthwidth.report.rows import StudyData
from depthwidth.report.targets import TargetEstimate
from depthwidth.report.trends import TrendReport, family_of


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    name: str
    title: str
    caption: str
    png: Path
    svg: Path

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "caption": self.caption, "png": self.png.name,
                "svg": self.svg.name}


def _save(fig, out: Path, name: str, title: str, caption: str) -> Figure:
    plt = pyplot()
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, dpi=110)
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return Figure(name=name, title=title, caption=caption, png=png, svg=svg)


def _group_colors(groups: Sequence[str]) -> dict[str, tuple]:
    cmap = pyplot().get_cmap("tab10")
    return {g: cmap(i % 10) for i, g in enumerate(groups)}


def reference_lines(ax, baselines) -> None:
    """The data's unigram and bigram cross-entropy (`depthwidth.data.baselines`) as labelled horizontal lines
    on a loss axis; a baseline far above the plotted losses is named at the top edge instead of stretching
    the axis (the losses' differences would vanish)."""
    if baselines is None:
        return
    lo, hi = ax.get_ylim()
    span = max(hi - lo, 1e-6)
    for name, value, style in (("bigram", baselines.bigram, "--"), ("unigram", baselines.unigram, ":")):
        if not math.isfinite(value):
            continue
        if value <= hi + 0.6 * span:
            ax.axhline(value, color="#b71c1c", ls=style, lw=1.1, zorder=1)
            ax.annotate(f"{name} baseline {value:.3f}", (0.005, value), xycoords=("axes fraction", "data"),
                        fontsize=7, color="#b71c1c", va="bottom")
            hi = max(hi, value + 0.04 * span)
        else:
            ax.annotate(f"{name} baseline {value:.3f} (above)", (0.995, 0.99), xycoords="axes fraction", fontsize=7,
                        color="#b71c1c", ha="right", va="top")
    ax.set_ylim(lo, hi)


def _label_points(ax, xs, ys, labels) -> None:
    for x, y, text in zip(xs, ys, labels):
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)


def plot_basin(study: StudyData, out: Path) -> Figure | None:
    rows = [r for r in study.results if r.val_loss is not None]
    if not rows:
        return None
    plt = pyplot()
    colors = _group_colors(study.groups)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for g in study.groups:
        pts = sorted((r for r in rows if r.group == g), key=lambda r: r.aspect_ratio)
        if not pts:
            continue
        xs = [r.aspect_ratio for r in pts]
        ys = [r.val_loss for r in pts]
        err = [r.val_loss_std or 0.0 for r in pts]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=colors[g], label=f"{g} ({len(pts)} shapes)")
        best = min(pts, key=lambda r: r.val_loss)
        ax.scatter([best.aspect_ratio], [best.val_loss], marker="*", s=220, color=colors[g], edgecolor="k", zorder=5)
        _label_points(ax, xs, ys, [f"L{r.n_layers}" for r in pts])
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("aspect ratio d_model / n_layers (log scale; left = deep and narrow)")
    ax.set_ylabel("validation loss (nats/token), mean ± sd over seeds")
    reference_lines(ax, study.baselines)
    ax.set_title("Loss against shape at a fixed budget, one line per scale (★ = best)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="best")
    return _save(fig, out, "basin", "Loss against aspect ratio",
                 "Each line is one budget; a flat bottom means many shapes are equally good at that scale.")


def plot_curves(study: StudyData, out: Path) -> Figure | None:
    groups = [g for g in study.groups if any(r.curves for r in study.results if r.group == g)]
    if not groups:
        return None
    import numpy as np

    plt = pyplot()
    fig, axes = plt.subplots(1, len(groups), figsize=(8.6 * len(groups), 4.9), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, g in zip(axes[0], groups):
        rows = sorted((r for r in study.results if r.group == g and r.curves), key=lambda r: r.n_layers)
        finals = []
        for i, r in enumerate(rows):
            color = cmap(0.85 * i / max(1, len(rows) - 1))  # the light yellow end is hard to see on white
            for j, c in enumerate(r.curves):
                label = f"{r.shape_label} (d/L {r.aspect_ratio:.0f})" if j == 0 else None
                if len(c.train_loss) >= 2:
                    k = max(1, len(c.train_loss) // 20)  # moving average over ~5% of the steps
                    smooth = np.convolve(c.train_loss, np.ones(k) / k, mode="valid")
                    ax.plot(c.train_tokens[k - 1:], smooth, color=color, lw=1.0, alpha=0.45, ls="--")
                pts = [(t, v) for t, v in zip(c.tokens, c.val_loss) if t > 0]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=1.8, marker="o", ms=3.5,
                            alpha=0.95 if j == 0 else 0.55, label=label)
                    finals.append(pts[-1][1])
        ax.plot([], [], color="0.4", lw=1.8, marker="o", ms=3.5, label="validation (markers: evaluations)")
        ax.plot([], [], color="0.4", lw=1.0, ls="--", alpha=0.6, label="training, smoothed")
        ax.set_xscale("log")
        count_ticks(ax.xaxis)
        if finals:
            lo, hi = min(finals), max(finals)
            ax.set_ylim(lo - 0.1 * max(hi - lo, 0.2), hi + 1.2 * max(hi - lo, 0.2))
        reference_lines(ax, study.baselines)
        ax.set_xlabel("training tokens (log scale)")
        ax.set_ylabel("loss (nats/token)")
        ax.set_title(f"{g}: loss while training, at each shape's best LR")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    return _save(fig, out, "curves", "Loss curves",
                 "Validation loss (solid, at each evaluation) and smoothed training loss (dashed) against tokens, "
                 "at each shape's selected learning rate; one line per seed.")


def plot_lr(study: StudyData, out: Path) -> Figure | None:
    groups = [g for g in study.groups  # (a panel needs one finite loss: the crosses have no y of their own)
              if any(v is not None for r in study.results if r.group == g for v in r.lr_losses.values())]
    if not groups:
        return None
    plt = pyplot()
    # one y scale for every panel: groups side by side (a parametrization factor) compare at a glance
    fig, axes = plt.subplots(1, len(groups), figsize=(7.6 * len(groups), 4.9), squeeze=False, sharey=True)
    cmap = plt.get_cmap("viridis")
    for ax, g in zip(axes[0], groups):
        rows = sorted((r for r in study.results if r.group == g and r.lr_losses), key=lambda r: r.n_layers)
        top = ax.get_xaxis_transform()  # x in data, y in axes fractions
        for i, r in enumerate(rows):
            color = cmap(0.85 * i / max(1, len(rows) - 1))
            pts = [(lr, v) for lr, v in r.lr_losses.items() if v is not None]
            bad = [lr for lr, v in r.lr_losses.items() if v is None]
            transferred = r.lr_mode == "transfer" and r.lr_transfer_from not in (None, r.shape_label)
            label = f"{r.shape_label}" + (f" (LR from {r.lr_transfer_from})" if transferred else "")
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=1.5,
                        marker="D" if transferred else "o", ms=4, label=label)
                ends = [pts[0], pts[-1]] if len(pts) > 1 else []
                ax.scatter([p[0] for p in ends], [p[1] for p in ends], marker="s", s=90, facecolors="none",
                           edgecolors=color, linewidths=1.2, zorder=4)
            if bad:
                ax.scatter(bad, [0.96] * len(bad), marker="x", color=color, s=40, transform=top, zorder=4)
            if r.best_lr is not None and r.lr_losses.get(r.best_lr) is not None:
                ax.scatter([r.best_lr], [r.lr_losses[r.best_lr]], marker="*", s=200, color=color, edgecolor="k",
                           zorder=5)
            if r.lr_optimum is not None and not transferred:
                ax.plot([r.lr_optimum] * 2, [0.0, 0.07], color=color, lw=2, transform=top)
            checks = sorted([(lr, v) for lr, v in r.lr_verify.items() if v is not None]
                            + [(lr, v) for lr, v in r.lr_losses.items() if v is not None and lr == r.best_lr])
            if r.lr_verify and len(checks) > 1:  # `[lr] verify`: the transferred LR and its neighbours
                ax.plot([p[0] for p in checks], [p[1] for p in checks], color=color, lw=1.2, ls="--", marker="^",
                        ms=6, mfc="none", zorder=3)
        ax.scatter([], [], marker="*", s=120, color="0.5", edgecolor="k", label="chosen LR")
        ax.scatter([], [], marker="s", s=70, facecolors="none", edgecolors="0.4", label="lowest / highest LR tried")
        ax.plot([], [], color="0.4", lw=2, label="interpolated optimum (tick)")
        ax.scatter([], [], marker="x", color="0.4", label="diverged or failed")
        if any(r.lr_verify for r in rows):
            ax.plot([], [], color="0.4", lw=1.2, ls="--", marker="^", mfc="none", label="transfer check ([lr] verify)")
        ax.set_xscale("log")
        plain_log_ticks(ax)
        ax.set_xlabel("peak learning rate (log scale)")
        ax.set_ylabel("validation loss (nats/token), mean over seeds")
        ax.set_title(f"{g}: loss against learning rate")
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    return _save(fig, out, "lr", "Loss against learning rate",
                 "Each shape's learning-rate trials (mean over seeds). A star inside a box is a best LR at the edge "
                 "of what was tried: its optimum may lie beyond. Ticks at the bottom mark the optimum interpolated "
                 "by a parabola in log LR; diamonds are shapes trained at a transferred LR; dashed lines with open "
                 "triangles are the transfer check of `[lr] verify` (the transferred LR and LRs around it).")


def _pareto_plot(study, out, *, name, xs_of, xlabel, title, caption, maximise_x: bool, log_x: bool):
    from depthwidth.shapes.evaluate import pareto_front

    rows = [(r, xs_of(r)) for r in study.results if r.val_loss is not None]
    rows = [(r, x) for r, x in rows if x is not None and x > 0]
    if not rows:
        return None
    plt = pyplot()
    colors = _group_colors(study.groups)
    fig, ax = plt.subplots(figsize=(8, 5.2))
    points = [((-x if maximise_x else x), r.val_loss) for r, x in rows]
    best = pareto_front(points)
    for (r, x), on_front in zip(rows, best):
        ax.scatter([x], [r.val_loss], color=colors[r.group], s=110 if on_front else 50,
                   marker="*" if on_front else "o", edgecolor="k", zorder=4)
        ax.annotate(r.shape_label, (x, r.val_loss), textcoords="offset points", xytext=(5, 4), fontsize=8)
    front = sorted((x, r.val_loss) for (r, x), b in zip(rows, best) if b)
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], ls="--", color="tab:red", lw=1.2, label="Pareto front")
    for g in study.groups:
        ax.scatter([], [], color=colors[g], label=g)
    if log_x:
        ax.set_xscale("log")
        plain_log_ticks(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="best")
    return _save(fig, out, name, title, caption)


def plot_pareto_latency(study: StudyData, targets: dict[str, TargetEstimate], out: Path, *,
                        hardware: str) -> Figure | None:
    sources = {t.decode_source for t in targets.values() if t.decode_ms is not None}
    return _pareto_plot(
        study, out, name="pareto_latency", xs_of=lambda r: targets[r.key].decode_ms if r.key in targets else None,
        xlabel=f"decode latency per token at batch 1, ms ({'; '.join(sorted(sources)) or hardware})",
        title=f"Loss against decode latency on {hardware} (★ = Pareto-best)",
        caption="Lower-left is better. Shapes off the dashed front are beaten on both loss and latency.",
        maximise_x=False, log_x=True)


def plot_pareto_throughput(study: StudyData, out: Path) -> Figure | None:
    return _pareto_plot(
        study, out, name="pareto_throughput", xs_of=lambda r: r.tokens_per_s,
        xlabel="training throughput, tokens/s (measured on the study's machine)",
        title="Loss against training speed (★ = Pareto-best)",
        caption="Lower-right is better: low loss and fast training.", maximise_x=True, log_x=False)


def plot_slices(study: StudyData, out: Path) -> Figure | None:
    rows = [r for r in study.results if r.slice_losses]
    slices = sorted({k for r in rows for k in r.slice_losses})
    if not rows or not slices:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(rows) + 3), 5.2))
    width = 0.8 / len(slices)
    cmap = plt.get_cmap("tab10")
    values = [v for r in rows for v in r.slice_losses.values()]
    base = min(values) - 0.1 * (max(values) - min(values) or 1.0)
    for j, s in enumerate(slices):
        xs = [i + (j - (len(slices) - 1) / 2) * width for i in range(len(rows))]
        ys = [r.slice_losses.get(s, math.nan) for r in rows]
        ax.bar(xs, [y - base for y in ys], width=width, bottom=base, color=cmap(j % 10), label=s)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r.shape_label} ({r.group})" for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("validation loss on the slice (nats/token)")
    ax.set_title("Loss by evaluation slice and shape")
    ax.grid(True, axis="y", alpha=0.25)
    ax.legend(title="slice", loc="best")
    return _save(fig, out, "slices", "Slice losses",
                 "Where shapes differ by slice, depth or width helps one kind of text more than another.")


def plot_latency_check(study: StudyData, out: Path) -> Figure | None:
    pts = []
    for r in study.results:
        for kind, m, p in (("decode", r.measured_decode_ms, r.bench_predicted_decode_ms),
                           ("prefill", r.measured_prefill_ms, r.bench_predicted_prefill_ms)):
            if m and p:
                pts.append((kind, r, m, p))
    if not pts:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5.6))
    for kind, marker, color in (("decode", "o", "tab:blue"), ("prefill", "s", "tab:orange")):
        sel = [(r, m, p) for k, r, m, p in pts if k == kind]
        if sel:
            ratios = sorted(m / p for _, m, p in sel)
            median = ratios[len(ratios) // 2] if len(ratios) % 2 else 0.5 * sum(ratios[len(ratios) // 2 - 1:][:2])
            ax.scatter([p for _, _, p in sel], [m for _, m, _ in sel], marker=marker, color=color, s=50,
                       edgecolor="k", zorder=4,
                       label=f"{kind}, batch 1: measured/predicted {ratios[0]:.2f}x to {ratios[-1]:.2f}x "
                             f"(median {median:.2f}x)")
            for r, m, p in (sel[0], sel[-1]) if len(sel) > 1 else sel:
                ax.annotate(r.shape_label, (p, m), textcoords="offset points", xytext=(6, -10), fontsize=8)
    lo = min(min(p, m) for _, _, m, p in pts) / 1.5
    hi = max(max(p, m) for _, _, m, p in pts) * 1.5
    ax.plot([lo, hi], [lo, hi], color="0.4", ls="--", lw=1, label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    plain_log_ticks(ax, x=True, y=True)
    hw = sorted({r.bench_hardware for r in study.results if r.bench_hardware})
    ax.set_xlabel(f"roofline prediction, ms ({', '.join(hw)})")
    ax.set_ylabel("measured, ms (median)")
    ax.set_title("Measured against predicted latency (above the line: slower than predicted)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right")
    return _save(fig, out, "latency_check", "Measured against predicted latency",
                 "How far to trust the roofline: the ratio measured/predicted per shape.")


def plot_fits(study: StudyData, trends: TrendReport, out: Path) -> Figure | None:
    fitted = [f for f in trends.families if f.fit is not None]
    if not fitted:
        return None
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.4))
    cmap = plt.get_cmap("plasma")
    n_max = max(f.fit.n_range[1] for f in fitted)
    top = n_max * max([p.factor for p in trends.extrapolation] + [1.0]) * 1.05
    for i, f in enumerate(fitted):
        color = cmap(i / max(1, len(fitted)))
        pts = [(r.non_embedding_params, v) for r in study.results
               if family_of(r.aspect_ratio) == f.family for v in r.seed_losses]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, s=25, zorder=4)
        grid = np.geomspace(f.fit.n_range[0] / 1.2, top, 60)
        bands = [f.fit.predict_interval(float(n)) for n in grid]
        ax.plot(grid, [b.value for b in bands], color=color, lw=1.5,
                label=f"{f.family}: {f.fit.E:.2f} + {f.fit.A:.3g}/N^{f.fit.alpha:.2f}"
                      + (" *" if f.family == trends.best_family else "")
                      + (f" ({f.distinct_n} scales: not determined)" if f.fit.warnings else ""))
        ax.fill_between(grid, [b.lo for b in bands], [b.hi for b in bands], color=color, alpha=0.15)
    reference_lines(ax, study.baselines)
    ax.axvline(n_max, color="0.5", ls=":", lw=1)
    ax.annotate("largest measured", (n_max, ax.get_ylim()[1]), fontsize=8, rotation=90, va="top", ha="right")
    ax.set_xscale("log")
    ax.set_xlabel("non-embedding parameters N (log scale)")
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("Fitted L(N) = E + A/N^α per aspect ratio, 95% bootstrap bands (* = best)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="upper right")
    return _save(fig, out, "fits", "Trend fits and extrapolation",
                 "Points are seeds; shaded bands are bootstrap intervals; right of the dotted line is extrapolation.")


__all__ = ["Figure", "reference_lines", "plot_basin", "plot_curves", "plot_fits", "plot_latency_check", "plot_lr", "plot_pareto_latency",
           "plot_pareto_throughput", "plot_slices"]
