"""What `depthwidth check coord` and `depthwidth check transfer` print and draw.

Tables are plain lines (numbers through `present.units`); the figures use the Agg backend, imported on first
use. Coordinate check: the RMS of the last layer's activations, of the logits and of the last layer's
update, against width and against depth, one line per parametrization (log-log). Transfer sweep: the final
validation loss against the learning rate, one curve per width and one per depth, one panel pair per
parametrization, the best point of each curve marked.
"""

from __future__ import annotations

import math
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.present.figures import plain_log_ticks, pyplot
from depthwidth.present.units import number, or_dash, ratio

SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_path(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise UserError(f"--plot {str(path)!r} must end in {', '.join(SUFFIXES[:-1])} or {SUFFIXES[-1]}")
    if not path.parent.is_dir() or path.is_dir():
        raise UserError(f"--plot {str(path)!r}: {'is a folder' if path.is_dir() else 'its folder does not exist'}")
    return path


# ---- coordinate check ---------------------------------------------------------------------------------
def coord_lines(result) -> list[str]:
    """One row per (parametrization, width, depth), then the growth factors."""
    title = (f"coordinate check: {result.steps} AdamW steps at lr {result.lr:g} (constant), base width "
             f"{result.base_width}, base depth {result.base_depth}; RMS on one fixed batch")
    header = (f"{'param':<10} {'width':>6} {'depth':>6} {'embed':>8} {'layer 1':>8} {'last':>8} {'logits':>8} "
              f"{'Δlast':>8} {'Δlogits':>8} {'loss':>7}")
    lines = [title, header]
    for p in result.points:
        lines.append(f"{p.parametrization:<10} {p.width:>6} {p.depth:>6} {number(p.embed):>8} {number(p.layers[0]):>8} "
                     f"{number(p.last):>8} {number(p.logits):>8} {number(p.layer_update[-1]):>8} "
                     f"{number(p.logits_update):>8} {p.loss:>7.3f}")
    lines.append("growth from the smallest to the largest size (the other size at its smallest):")
    growth = result.to_dict()["growth"]
    for pz, by in growth.items():
        parts = []
        for over in ("width", "depth"):
            g = by[over]
            parts.append(f"over {over}: last layer {or_dash(g['last'], ratio)}, logits {or_dash(g['logits'], ratio)}, "
                         f"Δlast {or_dash(g['last_update'], ratio)}")
        lines.append(f"  {pz:<10} " + "; ".join(parts))
    return lines


def plot_coord(result, path: str | Path) -> Path:
    path = check_plot_path(path)
    plt = pyplot()
    metrics = (("last", "last layer activation RMS"), ("logits", "logits RMS"), ("last_update", "last layer Δ RMS"))
    params = list(dict.fromkeys(p.parametrization for p in result.points))
    # a row per size that varies (both when neither does, so the figure is never empty of axes)
    sweeps = [o for o in ("width", "depth") if len({getattr(p, o) for p in result.points}) > 1] or ["width", "depth"]
    fig, axes = plt.subplots(len(sweeps), 3, figsize=(15, 4.3 * len(sweeps)), squeeze=False)
    fig.suptitle(f"coordinate check: {result.steps} steps, lr {result.lr:g}, base {result.base_width} wide x "
                 f"{result.base_depth} deep", fontsize=13)
    for row, over in enumerate(sweeps):
        other = "depth" if over == "width" else "width"
        for col, (key, title) in enumerate(metrics):
            ax = axes[row][col]
            for pz in params:
                mine = [p for p in result.points if p.parametrization == pz]
                for held in sorted({getattr(p, other) for p in mine}):
                    line = sorted((p for p in mine if getattr(p, other) == held), key=lambda p: getattr(p, over))
                    if len(line) < 2:
                        continue
                    ys = [{"last": p.last, "logits": p.logits, "last_update": p.layer_update[-1]}[key] for p in line]
                    ax.plot([getattr(p, over) for p in line], ys, marker="o", label=f"{pz}, {other} {held}")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel(over)
            ax.set_title(f"{title} vs {over}")
            if ax.lines:
                ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- transfer sweep -------------------------------------------------------------------------------------
def transfer_lines(result) -> list[str]:
    s = result.settings
    title = (f"LR transfer: {len(result.lrs)} learning rates {result.lrs[0]:.3g} .. {result.lrs[-1]:.3g} (x"
             f"{result.lrs[1] / result.lrs[0]:.3g} per grid step), {s['steps']} steps each, widths "
             f"{','.join(map(str, result.widths))} at depth {result.depths[0]}, depths "
             f"{','.join(map(str, result.depths))} at width {result.widths[0]}; final validation loss")
    lines = [title]
    lines.append(f"{'param':<10} {'width':>6} {'depth':>6} " + " ".join(f"{lr:>8.2g}" for lr in result.lrs)
                 + f" {'best lr':>9}")
    for c in result.curves:
        cells = []
        for i, v in enumerate(c.losses):
            text = f"{v:.3f}" if math.isfinite(v) else "div"
            cells.append(f"{(text + '*') if i == c.best_index else text:>8}")
        edge = " (edge)" if c.at_edge else ""
        lines.append(f"{c.parametrization:<10} {c.width:>6} {c.depth:>6} " + " ".join(cells)
                     + f" {or_dash(c.best_lr, '.3g'):>9}{edge}")
    lines.append("how far the optimum moves (grid steps; interpolated in brackets):")
    for pz in dict.fromkeys(c.parametrization for c in result.curves):
        parts = []
        for over in ("width", "depth"):
            sh = result.shift(pz, over)
            parts.append(f"over {over}: {or_dash(sh['grid_steps'], 'd')} ({or_dash(sh['interpolated_steps'], '.2f')})"
                         + (f", best at an edge for {over} {','.join(map(str, sh['edges']))}" if sh["edges"] else ""))
        lines.append(f"  {pz:<10} " + "; ".join(parts))
    return lines


def plot_transfer(result, path: str | Path) -> Path:
    path = check_plot_path(path)
    plt = pyplot()
    params = list(dict.fromkeys(c.parametrization for c in result.curves))
    fig, axes = plt.subplots(len(params), 2, figsize=(12, 4.6 * len(params)), squeeze=False)
    fig.suptitle(f"LR transfer: final validation loss after {result.settings['steps']} steps", fontsize=13)
    cmap = plt.get_cmap("viridis")
    for row, pz in enumerate(params):
        for col, over in enumerate(("width", "depth")):
            ax = axes[row][col]
            line = result.line(pz, over)
            for i, c in enumerate(line):
                color = cmap(i / max(1, len(line) - 1))
                xs = [lr for lr, v in zip(c.lrs, c.losses) if math.isfinite(v)]
                ys = [v for v in c.losses if math.isfinite(v)]
                ax.plot(xs, ys, marker="o", color=color, label=f"{over} {getattr(c, over)}")
                if c.best_index is not None:
                    ax.plot([c.best_lr], [c.losses[c.best_index]], marker="*", markersize=14, color=color)
            ax.set_xscale("log")
            plain_log_ticks(ax)
            held = f"depth {result.depths[0]}" if over == "width" else f"width {result.widths[0]}"
            sh = result.shift(pz, over)
            n = sh["grid_steps"]
            moved = "-" if n is None else f"{n} grid step{'' if n == 1 else 's'}"
            ax.set_title(f"{pz}: {over} sweep at {held} (optimum moves {moved})")
            ax.set_xlabel("learning rate")
            ax.set_ylabel("validation loss")
            if ax.lines:
                ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["check_plot_path", "coord_lines", "plot_coord", "plot_transfer", "transfer_lines"]
