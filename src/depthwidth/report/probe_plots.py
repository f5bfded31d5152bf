"""The "what depth buys / what width buys" panel: probe results by difficulty across the family's shapes,
next to the natural-text slices' losses against the same axis, and what they say in words.

Exact-match probes are drawn as accuracy against d_model/n_layers (left = deep), one line per difficulty
(and budget). Dense-target probes (hop-k induction, `depthwidth.data.hops`) are drawn as token error
against n_layers, one line per k, with error bars spanning the seeds at the selected learning rate; a
figure holding one draws every panel against n_layers. Depth-hungry probes should favour the deep
shapes, capacity-hungry ones (associative recall, memorised facts) the wide ones, if the family's shapes
differ in what they can do at all. A flat panel is a result too, and the caption says which it is.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.data.probes import DENSE_PROBES, KINDS
from depthwidth.report.rows import StudyData
from depthwidth.present.figures import pyplot
from depthwidth.report.study_plots import Figure, _save
from depthwidth.study.summary import ShapeResult

SOLVED = 0.05  # token error below which the caption counts a k as solved
ALIKE = 0.02  # best and worst mean token error closer than this: the shapes are alike at that k


def seed_values(study: StudyData, row: ShapeResult, get) -> list[float]:
    """`get(run)` for each completed seed of `row` at its selected learning rate (None values left out)."""
    runs = {r.run_id: r for r in study.runs}
    values = [get(runs[i]) for i in row.best_run_ids if i in runs]
    return [v for v in values if v is not None]


def token_error(row_or_run, probe: str, k: str) -> float | None:
    acc = row_or_run.probe_accuracy.get(probe, {}).get(k)
    return None if acc is None else 1.0 - acc


def _bars(study: StudyData, pts: list[ShapeResult], mean, per_seed) -> tuple[list, list, list]:
    """(means, below, above) per point: the bar spans the seeds' lowest to highest value."""
    means, lo, hi = [], [], []
    for r in pts:
        m = mean(r)
        seeds = seed_values(study, r, per_seed) or [m]
        means.append(m)
        lo.append(max(0.0, m - min(seeds)))
        hi.append(max(0.0, max(seeds) - m))
    return means, lo, hi


def plot_probes(study: StudyData, out: Path) -> Figure | None:
    rows = [r for r in study.results if r.probe_accuracy]
    if not rows:
        return None
    plt = pyplot()
    probes = sorted({p for r in rows for p in r.probe_accuracy}, key=lambda p: (KINDS.get(p, "~"), p))
    text_slices = sorted({s for r in study.results for s in r.slice_losses if not s.startswith("probe:")})
    by_depth = any(p in DENSE_PROBES for p in probes)
    x_of = (lambda r: r.n_layers) if by_depth else (lambda r: r.aspect_ratio)
    panels = len(probes) + (1 if text_slices else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.4), squeeze=False)
    styles = ["-", "--", ":", "-."]
    multi = len(study.groups) > 1
    for ax, probe in zip(axes[0], probes):
        difficulties = sorted({d for r in rows for d in r.probe_accuracy.get(probe, {})}, key=int)
        cmap = plt.get_cmap("viridis")
        dense = probe in DENSE_PROBES
        for gi, group in enumerate(study.groups):
            pts = sorted((r for r in rows if r.group == group and probe in r.probe_accuracy), key=x_of)
            for di, d in enumerate(difficulties):
                have = [r for r in pts if d in r.probe_accuracy[probe]]
                if not have:
                    continue
                label = (f"k={d}" if dense else f"{d}") + (f" ({group})" if multi else "")
                color = cmap(di / max(1, len(difficulties) - 1))
                if dense:
                    means, lo, hi = _bars(study, have, lambda r: token_error(r, probe, d),
                                          lambda run: token_error(run, probe, d))
                    ax.errorbar([x_of(r) for r in have], means, yerr=[lo, hi], marker="o", capsize=3,
                                ls=styles[gi % len(styles)], color=color, label=label)
                else:
                    ax.plot([x_of(r) for r in have], [r.probe_accuracy[probe][d] for r in have], marker="o",
                            ls=styles[gi % len(styles)], color=color, label=label)
            if not by_depth:
                for r in pts:
                    ax.annotate(f"L{r.n_layers}", (r.aspect_ratio, 1.0), fontsize=7, ha="center", va="bottom",
                                color="0.4")
        kind = KINDS.get(probe)
        ax.set_title((f"{probe} ({kind}-hungry)" if kind else probe) + (": token error by k" if dense else ""))
        if dense:
            ax.set_ylim(bottom=-0.02)
            ax.set_ylabel("token error (held-out; bars: seeds)")
        else:
            ax.set_ylim(-0.03, 1.08)
            ax.set_ylabel("exact-match accuracy (held-out)")
        ax.legend(title=None if dense else "difficulty", fontsize=7, loc="best")
    if text_slices:
        ax = axes[0][-1]
        colors = plt.get_cmap("tab10")
        for si, s in enumerate(text_slices):
            for gi, group in enumerate(study.groups):
                pts = sorted((r for r in study.results if r.group == group and s in r.slice_losses), key=x_of)
                if pts:
                    means, lo, hi = _bars(study, pts, lambda r: r.slice_losses[s],
                                          lambda run: run.slice_losses.get(s))
                    ax.errorbar([x_of(r) for r in pts], means, yerr=[lo, hi], marker="o", capsize=3,
                                ls=styles[gi % len(styles)], color=colors(si % 10),
                                label=s + (f" ({group})" if multi else ""))
        ax.set_title("natural-text slices")
        ax.set_ylabel("validation loss (nats/token)")
        ax.legend(fontsize=7, loc="best")
    depths = sorted({r.n_layers for r in study.results})
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
        if by_depth:
            ax.set_xticks(depths)
            ax.set_xlabel("n_layers (equal parameters: right = deep and narrow)")
        else:
            ax.set_xlabel("d_model / n_layers (left = deep)")
        ax.grid(True, which="both", alpha=0.25)
    fig.suptitle("What depth buys / what width buys")
    caption = ("Probe results by difficulty across shapes at equal parameters, beside the loss of natural-text "
               "slices. Depth-hungry probes should favour the deep shapes, capacity-hungry ones the wide "
               "ones; a flat panel means this budget does not separate them.")
    verdict = probe_verdict(study)
    return _save(fig, out, "probes", "What depth buys / what width buys",
                 caption + (" " + " ".join(verdict) if verdict else ""))


def probe_verdict(study: StudyData) -> list[str]:
    """Sentences saying which shapes each dense probe favours, per budget group, and how the natural-text
    slices compare. For each k: the best and the worst shape by mean token error (`ALIKE` when closer than
    that), and whether their seeds
    lie apart (every seed of the best below every seed of the worst: the probe favours the best one's side,
    deeper or wider) or overlap (no clear winner at this budget); then the hop counts each shape solves
    (token error below `SOLVED`) on the mean of its seeds and on its best seed; then the best shape of each
    natural-text slice."""
    out = []
    multi = len(study.groups) > 1
    for group in study.groups:
        rows = sorted((r for r in study.results if r.group == group), key=lambda r: r.n_layers)
        where = f" ({group})" if multi else ""
        for probe in sorted({p for r in rows for p in r.probe_accuracy if p in DENSE_PROBES}):
            have = [r for r in rows if probe in r.probe_accuracy]
            ks = sorted({k for r in have for k in r.probe_accuracy[probe]}, key=int)
            parts, deeper, wider = [], [], []
            for k in ks:
                scored = [(e, r) for r in have if (e := token_error(r, probe, k)) is not None]
                if len(scored) < 2:
                    continue
                (best_err, best), (worst_err, worst) = min(scored, key=lambda t: t[0]), max(scored, key=lambda t: t[0])
                per_seed = lambda r: seed_values(study, r, lambda run: token_error(run, probe, k)) or [  # noqa: E731
                    token_error(r, probe, k)]
                if worst_err - best_err < ALIKE:
                    verdict = "alike"
                elif max(per_seed(best)) >= min(per_seed(worst)):
                    verdict = "seeds overlap"
                else:
                    side = deeper if best.n_layers > worst.n_layers else wider
                    side.append(k)
                    verdict = "deeper is better" if side is deeper else "wider is better"
                parts.append(f"k={k} {best_err:.3f} ({best.shape_label}) vs {worst_err:.3f} ({worst.shape_label}), "
                             f"{verdict}")
            if not parts:
                continue
            out.append(f"{probe}{where}, token error by k, best vs worst shape (mean of seeds): {'; '.join(parts)}.")
            if deeper or wider:
                sides = [f"the deeper shapes at k={', '.join(deeper)}"] if deeper else []
                sides += [f"the wider shapes at k={', '.join(wider)}"] if wider else []
                out.append(f"Where the seeds separate, {probe}{where} favours {' and '.join(sides)}.")
            else:
                out.append(f"At no k do the seeds of the best and the worst shape separate: this budget does not show "
                           f"what depth buys on {probe}{where}.")
            solved = []
            for r in have:
                mean_ok = [int(k) for k in ks if (e := token_error(r, probe, k)) is not None and e < SOLVED]
                seed_ok = [int(k) for k in ks if any(e < SOLVED for e in seed_values(
                    study, r, lambda run, k=k: token_error(run, probe, k)))]
                solved.append(f"{r.shape_label} {_upto(mean_ok)} [{_upto(seed_ok)}]")
            out.append(f"Hop counts solved (token error below {SOLVED:.0%}){where}, mean of seeds [best seed]: "
                       f"{', '.join(solved)}.")
        for s in sorted({s for r in rows for s in r.slice_losses if not s.startswith("probe:")}):
            have = [r for r in rows if s in r.slice_losses]
            if len(have) > 1:
                best = min(have, key=lambda r: r.slice_losses[s])
                worst = max(have, key=lambda r: r.slice_losses[s])
                out.append(f"Natural text {s}{where}: lowest loss {best.slice_losses[s]:.3f} for {best.shape_label}, "
                           f"highest {worst.slice_losses[s]:.3f} for {worst.shape_label}.")
    return out


def _upto(ks: list[int]) -> str:
    """'k=1-3' for a run of hop counts, 'k=1,3' otherwise, 'none' for none."""
    if not ks:
        return "none"
    if len(ks) > 1 and ks == list(range(min(ks), max(ks) + 1)):
        return f"k={min(ks)}-{max(ks)}"
    return "k=" + ",".join(map(str, ks))


__all__ = ["plot_probes", "probe_verdict", "seed_values", "token_error"]
