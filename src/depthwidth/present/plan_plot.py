"""The depth-versus-width trade-off picture of a planned family (`depthwidth plan --plot out.png`).

Three panels, readable without the table:
1. the budget curve in (width, depth), log-log, where equal parameters means L ~ 1/H^2 (a line of
   slope -2), with the exact curve (embeddings included), the members and the dropped candidates;
2. per-layer activation memory against sequential depth: deep-narrow members sit low and to the
   right (little memory per layer, a long chain of layers), shallow-wide ones high and to the left;
3. decode latency per token at batch 1 against training memory per device, Pareto-best members starred.
matplotlib (Agg backend) is imported inside `plot_plan`, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.files import atomic_write, missing_folders
from depthwidth.present.figures import plain_log_ticks, pyplot
from depthwidth.present.plan import budget_text
from depthwidth.present.units import GiB, MiB, number
from depthwidth.shapes.evaluate import PlanResult
from depthwidth.shapes.families import iso_curve

SUFFIXES = (".png", ".svg", ".pdf")


@dataclass(frozen=True, kw_only=True, slots=True)
class _Marks:
    """How each member is drawn in every panel: its colour (deep to shallow), label and Pareto star."""

    colors: tuple
    labels: tuple[str, ...]
    pareto: tuple[bool, ...]


def check_plot_target(path: Path) -> None:
    """Refuse, naming `path`, a plot target that cannot be written: a wrong suffix, a folder, a path
    through a file (`x.txt/plot.png`), or a folder this process may not write in (a read-only one). A
    missing folder is created when the plot is written."""
    if path.suffix.lower() not in SUFFIXES:
        raise UserError(f"plot path {str(path)!r} must end in {', '.join(SUFFIXES[:-1])} or {SUFFIXES[-1]}")
    if path.is_dir():
        raise UserError(f"--plot {path}: is a folder; give a file name ending in {', '.join(SUFFIXES)}")
    above = next((p for p in path.parents if p.exists() or p.is_symlink()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"--plot {path}: {above} is not a folder")
    if above is not None and not os.access(above, os.W_OK | os.X_OK):  # read-only (a mount too), or not ours
        raise UserError(f"--plot {path}: cannot write the plot (the folder {above} is not writable)")


def _write_figure(fig, path: Path) -> None:
    """Write `fig` to `path` atomically (`files.atomic_write`); an `OSError` (a read-only or full disk, a
    folder it may not create) is one UserError naming the path, with nothing of the attempt left."""
    created = missing_folders(path.parent)
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format=path.suffix[1:].lower()))
    except OSError as exc:
        for folder in created:  # deepest first; rmdir removes only the ones still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        reason = exc.strerror or str(exc) or type(exc).__name__
        where = f": {exc.filename}" if exc.filename not in (None, str(path)) else ""
        raise UserError(f"--plot {path}: cannot write the plot ({reason}{where})") from None


def plot_plan(result: PlanResult, path: str | Path) -> Path:
    """Draw `result` to `path` (PNG, SVG or PDF by suffix) and return the path; a path that cannot be
    written is one UserError naming it (`check_plot_target`, `_write_figure`)."""
    path = Path(path)
    check_plot_target(path)
    plt = pyplot()
    members = result.family.members
    cmap = plt.get_cmap("viridis")
    marks = _Marks(colors=tuple(cmap(i / max(1, len(members) - 1)) for i in range(len(members))),
                   labels=tuple(m.shape.label() for m in members), pareto=tuple(result.pareto))
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.6))
    fig.suptitle(f"{result.family.kind} family at {budget_text(result.family.to_dict())}: depth versus width "
                 f"({result.hardware.name}, {result.workload.dtype}, seq {result.workload.seq_len})", fontsize=13)
    _budget_panel(axes[0], result, marks)
    _memory_panel(axes[1], result, marks)
    _latency_panel(axes[2], result, marks)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    try:
        _write_figure(fig, path)
    finally:
        plt.close(fig)
    return path


def _budget_panel(ax, result: PlanResult, marks: _Marks) -> None:
    """Width against depth: the exact budget curve, the L ~ 1/H^2 slope, aspect-ratio guides, the members."""
    fam = result.family
    depths = [m.shape.n_layers for m in fam.members]
    widths = [m.shape.d_model for m in fam.members]
    lo, hi = min(widths) / 1.6, max(widths) * 1.6
    grid = [w for w in range(fam.head_dim, int(hi) + fam.head_dim, fam.head_dim) if w >= lo]
    curve = iso_curve(fam, widths=grid)
    if curve:
        counted = "embeddings and attention" if fam.kind == "iso-compute" else "embeddings"
        ax.plot([c[0] for c in curve], [c[1] for c in curve], color="0.3", lw=2,
                label=f"exact budget curve ({counted} counted)")
    mid = len(depths) // 2
    ax.plot([lo, hi], [depths[mid] * (widths[mid] / w) ** 2 for w in (lo, hi)], ls="--", color="tab:red", lw=1,
            label="L ∝ 1/H² (slope −2)")
    y_lo, y_hi = max(0.8, min(depths) / 2.5), max(depths) * 2.5
    for aspect in (16, 64, 256):
        ax.plot([lo, hi], [lo / aspect, hi / aspect], ls=":", color="0.7", lw=1)
        x = min(hi / 1.04, y_hi * aspect / 1.15)
        if x / aspect > y_lo and x > lo:
            ax.annotate(f"d/L = {aspect}", (x, x / aspect), fontsize=7, color="0.45", ha="right", va="bottom")
    dropped = [d for d in fam.dropped if d.n_layers and d.d_model]
    if dropped:
        ax.scatter([d.d_model for d in dropped], [d.n_layers for d in dropped], marker="x", color="0.55",
                   label=f"dropped (outside {fam.tolerance:.0%})", zorder=3)
    for m, color, label, best in zip(fam.members, marks.colors, marks.labels, marks.pareto):
        ax.scatter(m.shape.d_model, m.shape.n_layers, s=140 if best else 70, color=color, edgecolor="k",
                   marker="*" if best else "o", zorder=4)
        ax.annotate(f"{label}\n{m.error:+.1%}", (m.shape.d_model, m.shape.n_layers), textcoords="offset points",
                    xytext=(7, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlim(lo, hi)
    plain_log_ticks(ax, x=True, y=True)
    ax.set_xlabel("width d_model (H)")
    ax.set_ylabel("depth n_layers (L)")
    ax.set_title("Equal budget: depth falls as 1/width²")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(True, which="both", alpha=0.2)


def _memory_panel(ax, result: PlanResult, marks: _Marks) -> None:
    """Per-layer activation memory against the number of layers on the critical path."""
    depths = [m.shape.n_layers for m in result.family.members]
    act = [e.summary.memory.activation_bytes_per_layer / MiB for e in result.evaluations]
    for depth, a, color, label, e in zip(depths, act, marks.colors, marks.labels, result.evaluations):
        ax.scatter(depth, a, s=90, color=color, edgecolor="k", zorder=4)
        ax.annotate(f"{label}\ndecode {number(e.decode.total_s * 1e3)} ms", (depth, a), textcoords="offset points",
                    xytext=(7, 4), fontsize=8)
    ax.plot(depths, act, color="0.6", lw=1, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(depths) / 1.5, max(depths) * 2.2)
    ax.set_ylim(min(act) / 1.8, max(act) * 1.8)
    plain_log_ticks(ax, x=True, y=True)
    ax.set_xlabel("sequential depth n_layers (layers on the critical path)")
    ax.set_ylabel(f"activation memory per layer (MiB, batch {result.workload.batch})")
    ax.set_title("Deep-narrow: less memory per layer, longer path")
    ax.annotate("shallow-wide:\nmuch memory per layer,\nshort sequential path", xy=(0.03, 0.97),
                xycoords="axes fraction", va="top", fontsize=9, color="tab:orange")
    ax.annotate("deep-narrow:\nlittle memory per layer,\nlong sequential path", xy=(0.97, 0.03),
                xycoords="axes fraction", ha="right", va="bottom", fontsize=9, color="tab:blue")
    ax.grid(True, which="both", alpha=0.2)


def _latency_panel(ax, result: PlanResult, marks: _Marks) -> None:
    """Decode latency against training memory, the Pareto-best members joined."""
    lat = [e.decode.total_s * 1e3 for e in result.evaluations]
    mem = [e.summary.memory.total_training_bytes / GiB for e in result.evaluations]
    for x, y, color, label, best in zip(lat, mem, marks.colors, marks.labels, marks.pareto):
        ax.scatter(x, y, s=160 if best else 80, color=color, edgecolor="k", marker="*" if best else "o", zorder=4)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(7, 4), fontsize=8)
    front = sorted((x, y) for x, y, best in zip(lat, mem, marks.pareto) if best)
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", lw=1, ls="--", label="Pareto front")
        ax.legend(fontsize=8)
    ax.set_xlabel("decode latency per token at batch 1 (ms, roofline + per-op cost)")
    ax.set_ylabel(f"training memory per device (GiB, batch {result.workload.batch})")
    ax.set_title("Latency versus memory (★ = Pareto-best)")
    span_x = max(lat) - min(lat) or max(lat)
    ax.set_xlim(min(lat) - 0.15 * span_x, max(lat) + 0.35 * span_x)
    ax.grid(True, alpha=0.2)


__all__ = ["SUFFIXES", "check_plot_target", "plot_plan"]
