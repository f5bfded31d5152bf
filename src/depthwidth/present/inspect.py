"""How `depthwidth inspect` looks: one table row per block and a plot against relative depth, both from
`Inspection.to_dict()` (no torch here)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from depthwidth.present.figures import pyplot


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def summary_line(result: dict[str, Any]) -> str:
    removed = ", ".join(str(i) for i in result["removed"]) or "none"
    return (f"{result['shape']} on {result['data']}: loss {result['loss']:.4f} nats over {result['windows']} "
            f"windows ({result['tokens']} tokens); effective depth {result['effective_depth']} of "
            f"{result['n_layers']} within {result['tolerance']:g} nats (removed: {removed})")


def layer_table(result: dict[str, Any]) -> Table:
    table = Table(title="layers (drop: loss increase with the block skipped; lens: head on its output)")
    for name in ("layer", "l/L", "drop", "drop l,l+1", "BI", "ang n=1", "ang n=2", "ang n=4", "lens loss",
                 "lens KL", "attn/resid", "mlp/resid"):
        table.add_column(name, justify="right")
    L = result["n_layers"]
    ang = result["angular_distance"]
    for i in range(L):
        pair = result["pair_increase"][i] if i < L - 1 else None
        table.add_row(str(i), f"{(i + 1) / L:.2f}", _f(result["drop_increase"][i], 4), _f(pair, 4),
                      _f(result["block_influence"][i]), _f(ang["1"][i]), _f(ang["2"][i]), _f(ang["4"][i]),
                      _f(result["lens_loss"][i]), _f(result["lens_kl"][i]), _f(result["attn_ratio"][i]),
                      _f(result["mlp_ratio"][i]))
    return table


def plot_layers(result: dict[str, Any], path: str) -> None:
    """PNG: drop-a-layer increase and logit-lens loss (left), block influence (right) against l/L."""
    plt = pyplot()
    L = result["n_layers"]
    depth = [(i + 1) / L for i in range(L)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(depth, result["drop_increase"], "o-", label="drop-a-layer increase (nats)")
    left.plot(depth, [v - result["loss"] for v in result["lens_loss"]], "s--", label="logit lens loss - model loss")
    left.axhline(0.0, color="grey", lw=0.5)
    left.set_xlabel("relative depth l / L")
    left.set_ylabel("nats per token")
    left.legend()
    right.plot(depth, result["block_influence"], "o-", label="block influence 1 - cos")
    right.plot(depth, result["angular_distance"]["1"], "^:", label="angular distance n=1")
    right.set_xlabel("relative depth l / L")
    right.legend()
    fig.suptitle(f"{result['shape']}: effective depth {result['effective_depth']} of {L}")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
