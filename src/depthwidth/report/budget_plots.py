"""The report's "ranking against budget" panel (`report.budgets`): one figure per study with horizons -
validation loss against training tokens, against model training FLOPs and against seconds predicted on
the report's hardware, each shape a line through its budgets with one-standard-error bars over seeds -
and its HTML: the verdict per budget, the crossovers and the ranking at equal predicted time."""

from __future__ import annotations

from html import escape
from pathlib import Path

from depthwidth.present.figures import pyplot
from depthwidth.present.units import count
from depthwidth.report.budgets import BudgetRanking
from depthwidth.report.study_plots import Figure, _save, reference_lines

AXES = (("tokens", "training tokens"), ("flops", "model training FLOPs"), ("seconds", "predicted training seconds"))


def plot_budgets(ranking: BudgetRanking | None, out: Path, *, hardware: str = "", baselines=None) -> Figure | None:
    if ranking is None or not ranking.ladders:
        return None
    plt = pyplot()
    rows = len(ranking.ladders)
    fig, axes = plt.subplots(rows, 3, figsize=(13, 3.8 * rows), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for row, ladder in zip(axes, ranking.ladders):
        labels = sorted({p.shape_label for p in ladder.points},
                        key=lambda s: -next(p.n_layers for p in ladder.points if p.shape_label == s))
        for col, (key, xlabel) in enumerate(AXES):
            ax = row[col]
            drawn = False
            for i, label in enumerate(labels):
                pts = sorted((p for p in ladder.points if p.shape_label == label), key=lambda p: p.tokens)
                xs = [getattr(p, key) for p in pts]
                if any(x is None or x <= 0 for x in xs):
                    continue
                ax.errorbar(xs, [p.loss for p in pts], yerr=[p.sem or 0.0 for p in pts], marker="o", ms=4,
                            capsize=3, color=cmap(i / max(1, len(labels) - 1)), label=label)
                drawn = True
            if not drawn:
                ax.text(0.5, 0.5, "no prediction on this hardware", ha="center", va="center", transform=ax.transAxes)
                continue
            ax.set_xscale("log")
            _ticks(ax, key, [getattr(p, key) for p in ladder.points if getattr(p, key)])
            ax.set_xlabel(xlabel + (f" ({hardware})" if key == "seconds" and hardware else ""))
            ax.set_ylabel("validation loss (nats/token)")
            ax.set_title(f"{ladder.group}: loss against {xlabel.split(' ')[-1]}", fontsize=10)
            reference_lines(ax, baselines)
            for c in [c for c in ladder.crossovers if c.resolved] if key == "tokens" else ():
                ax.axvspan(c.low, c.high, color="0.85", zorder=0)
                ax.axvline(c.tokens, color="0.5", ls=":", lw=1)
        row[0].legend(fontsize=8)
    caption = ("Each shape's loss at each horizon of its run (cooldown branches of one WSD run; the learning rate "
               "chosen at the full horizon), mean over seeds with one standard error. Grey bands: a flip of two "
               "shapes' order between two measured budgets beyond two standard errors at both, with its interval.")
    return _save(fig, out, "budgets", "Ranking against budget", caption)


def _ticks(ax, key: str, xs: list[float]) -> None:
    """Four log-spaced x ticks over the measured range, two significant digits, labelled 10K, 2M (counts) or
    0.5 (seconds): matplotlib's log locator falls back to dense linear ticks within one decade."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    lo, hi = min(xs), max(xs)
    ticks = sorted({float(f"{lo * (hi / lo) ** (i / 3):.2g}") for i in range(4)}) if hi > lo else [lo]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2g}" if key == "seconds" else count(v)))


def budgets_html(ranking: BudgetRanking | None) -> str:
    if ranking is None or not ranking.ladders:
        return ('<p class="muted">One token budget per shape: give the study <code>[train] schedule = "wsd"</code> '
                "and <code>horizons = [0.25, 0.5, 1.0]</code> to read the ranking at several budgets from one run "
                "per shape.</p>" + "".join(f'<div class="warn">{escape(w)}</div>' for w in ranking.warnings)
                if ranking is not None else "")
    parts = []
    for lad in ranking.ladders:
        parts.append(f"<h3>{escape(lad.group)}</h3><ul>" + "".join(f"<li>{escape(v)}</li>" for v in lad.verdicts)
                     + "</ul>")
        real = [c for c in lad.crossovers if c.resolved]
        noise = [c for c in lad.crossovers if not c.resolved]
        if real:
            parts.append("<p>Order flips within the measured budgets, beyond two standard errors at both ends:</p><ul>"
                         + "".join(f"<li>{escape(c.a)} ahead below, {escape(c.b)} ahead above about {c.tokens:,.0f} "
                                   f"tokens (interval {c.low:,.0f} to {c.high:,.0f}; between the measured "
                                   f"{c.between[0]:,} and {c.between[1]:,})</li>" for c in real) + "</ul>")
        else:
            parts.append('<p class="muted">No two shapes change order beyond the seed noise within the measured '
                         "budgets.</p>")
        if noise:
            parts.append('<p class="muted">Within the seed noise (not a swap the data resolve): ' + escape("; ".join(
                f"{c.a} / {c.b} near {c.tokens:,.0f} tokens" for c in noise)) + ".</p>")
        if lad.equal_time:
            rows = "".join(
                f"<tr><td class='num'>{e['seconds']:.3g}</td><td>"
                + escape(", ".join(f"{label} {loss:.4f}" for label, loss in e["ranking"]))
                + f"</td><td>{escape(', '.join(e['outside']) or '-')}</td></tr>" for e in lad.equal_time)
            parts.append("<p>At equal predicted time (each shape's loss interpolated in log seconds between its own "
                         "measured budgets, never beyond them):</p><table><thead><tr><th>seconds</th>"
                         f"<th>ranking (loss)</th><th>outside its budgets</th></tr></thead><tbody>{rows}</tbody></table>")
    parts.append('<p class="muted">The learning rate of every horizon is the one chosen at the full horizon.</p>')
    parts += [f'<div class="warn">{escape(w)}</div>' for w in ranking.warnings]
    return "".join(parts)


__all__ = ["budgets_html", "plot_budgets"]
