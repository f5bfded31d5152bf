"""What every matplotlib figure of depthwidth shares: the Agg backend (no display needed), one set of font
sizes, SVGs that are the same bytes for the same picture, and log axes labelled in plain numbers."""

from __future__ import annotations

from depthwidth.present.units import count


def pyplot():
    """matplotlib.pyplot on the Agg backend with depthwidth's font sizes (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "legend.fontsize": 8, "svg.hashsalt": "depthwidth"})
    return plt


def plain_log_ticks(ax, *, x: bool = True, y: bool = False) -> None:
    """Log axes labelled 0.2, 0.5, 1, 2, 5, ... instead of 2x10^-1 (labels that do not collide)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis, on in ((ax.xaxis, x), (ax.yaxis, y)):
        if on:
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def count_ticks(axis) -> None:
    """An axis of counts (tokens, parameters) labelled 10K, 1M, ... (`units.count`)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: count(v)))
    axis.set_minor_formatter(NullFormatter())


__all__ = ["count_ticks", "plain_log_ticks", "pyplot"]
