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

from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.shapes.evaluate import PlanResult
from depthwidth.shapes.families import human, iso_curve

MiB = 2**20
GiB = 2**30


def plot_plan(result: PlanResult, path: str | Path) -> Path:
    """Draw `result` to `path` (PNG, SVG or PDF by suffix) and return the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UserError(f"plot path {str(path)!r} must end in .png, .svg or .pdf")
    fam = result.family
    members = fam.members
    evals = result.evaluations
    depths = [m.shape.n_layers for m in members]
    widths = [m.shape.d_model for m in members]
    cmap = plt.get_cmap("viridis")
    colors = [cmap(i / max(1, len(members) - 1)) for i in range(len(members))]
    labels = [m.shape.label() for m in members]

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.6))
    what = {"params": "parameters", "non_embedding_params": "non-embedding parameters",
            "train_flops": "training FLOPs"}[fam.target_name]
    fig.suptitle(f"{fam.kind} family at {human(fam.target)} {what}: depth versus width "
                 f"({result.hardware.name}, {result.workload.dtype}, seq {result.workload.seq_len})", fontsize=13)

    # 1. the budget curve
    ax = axes[0]
    lo, hi = min(widths) / 1.6, max(widths) * 1.6
    step = fam.head_dim
    grid = [w for w in range(step, int(hi) + step, step) if w >= lo]
    curve = iso_curve(fam, widths=grid)
    if curve:
        counted = "embeddings and attention" if fam.kind == "iso-compute" else "embeddings"
        ax.plot([c[0] for c in curve], [c[1] for c in curve], color="0.3", lw=2,
                label=f"exact budget curve ({counted} counted)")
    mid = len(members) // 2
    ref_w = [lo, hi]
    ax.plot(ref_w, [depths[mid] * (widths[mid] / w) ** 2 for w in ref_w], ls="--", color="tab:red", lw=1,
            label="L ∝ 1/H² (slope −2)")
    y_lo, y_hi = max(0.8, min(depths) / 2.5), max(depths) * 2.5
    for aspect in (16, 64, 256):
        ax.plot(ref_w, [w / aspect for w in ref_w], ls=":", color="0.7", lw=1)
        x = min(hi / 1.04, y_hi * aspect / 1.15)
        if x / aspect > y_lo and x > lo:
            ax.annotate(f"d/L = {aspect}", (x, x / aspect), fontsize=7, color="0.45", ha="right", va="bottom")
    dropped = [d for d in fam.dropped if d.n_layers and d.d_model]
    if dropped:
        ax.scatter([d.d_model for d in dropped], [d.n_layers for d in dropped], marker="x", color="0.55",
                   label=f"dropped (outside {fam.tolerance:.0%})", zorder=3)
    for m, c, lab, best in zip(members, colors, labels, result.pareto):
        ax.scatter(m.shape.d_model, m.shape.n_layers, s=140 if best else 70, color=c, edgecolor="k",
                   marker="*" if best else "o", zorder=4)
        ax.annotate(f"{lab}\n{m.error:+.1%}", (m.shape.d_model, m.shape.n_layers), textcoords="offset points",
                    xytext=(7, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlim(lo, hi)
    _plain_log_ticks(ax, FuncFormatter, LogLocator, NullFormatter)
    ax.set_xlabel("width d_model (H)")
    ax.set_ylabel("depth n_layers (L)")
    ax.set_title("Equal budget: depth falls as 1/width²")
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(True, which="both", alpha=0.2)

    # 2. per-layer memory versus sequential depth
    ax = axes[1]
    act = [e.summary.memory.activation_bytes_per_layer / MiB for e in evals]
    for m, c, a, lab, e in zip(members, colors, act, labels, evals):
        ax.scatter(m.shape.n_layers, a, s=90, color=c, edgecolor="k", zorder=4)
        ax.annotate(f"{lab}\ndecode {e.decode.total_s * 1e3:.3g} ms", (m.shape.n_layers, a),
                    textcoords="offset points", xytext=(7, 4), fontsize=8)
    ax.plot(depths, act, color="0.6", lw=1, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(depths) / 1.5, max(depths) * 2.2)
    ax.set_ylim(min(act) / 1.8, max(act) * 1.8)
    _plain_log_ticks(ax, FuncFormatter, LogLocator, NullFormatter)
    ax.set_xlabel("sequential depth n_layers (layers on the critical path)")
    ax.set_ylabel(f"activation memory per layer (MiB, batch {result.workload.batch})")
    ax.set_title("Deep-narrow: less memory per layer, longer path")
    ax.annotate("shallow-wide:\nmuch memory per layer,\nshort sequential path", xy=(0.03, 0.97),
                xycoords="axes fraction", va="top", fontsize=9, color="tab:orange")
    ax.annotate("deep-narrow:\nlittle memory per layer,\nlong sequential path", xy=(0.97, 0.03),
                xycoords="axes fraction", ha="right", va="bottom", fontsize=9, color="tab:blue")
    ax.grid(True, which="both", alpha=0.2)

    # 3. decode latency versus training memory
    ax = axes[2]
    lat = [e.decode.total_s * 1e3 for e in evals]
    mem = [e.summary.memory.total_training_bytes / GiB for e in evals]
    for x, y, c, lab, best in zip(lat, mem, colors, labels, result.pareto):
        ax.scatter(x, y, s=160 if best else 80, color=c, edgecolor="k", marker="*" if best else "o", zorder=4)
        ax.annotate(lab, (x, y), textcoords="offset points", xytext=(7, 4), fontsize=8)
    front = sorted((x, y) for x, y, best in zip(lat, mem, result.pareto) if best)
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], color="tab:red", lw=1, ls="--", label="Pareto front")
        ax.legend(fontsize=8)
    ax.set_xlabel("decode latency per token at batch 1 (ms, roofline + per-op cost)")
    ax.set_ylabel(f"training memory per device (GiB, batch {result.workload.batch})")
    ax.set_title("Latency versus memory (★ = Pareto-best)")
    span_x = max(lat) - min(lat) or max(lat)
    ax.set_xlim(min(lat) - 0.15 * span_x, max(lat) + 0.35 * span_x)
    ax.grid(True, alpha=0.2)

    fig.tight_layout(rect=(0, 0, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _plain_log_ticks(ax, FuncFormatter, LogLocator, NullFormatter) -> None:
    """Log axes labelled 1, 2, 5, 10, 20, ... in plain numbers instead of 2x10^1."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


__all__ = ["plot_plan"]
