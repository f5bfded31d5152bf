"""Rich tables of `depthwidth plan` and `depthwidth compare` results.

Input is the plain dicts of `PlanResult.to_dict()` / `Comparison.to_dict()`, so stored JSON renders
the same way. Two tables per plan (the shapes; their costs) keep each one readable at 120 columns.
"""

from __future__ import annotations

from typing import Any

import sys

from rich import box
from rich.console import Console
from rich.table import Table

from depthwidth.shapes.evaluate import QUANTITIES, value_at

PARETO_MARK = "*"


def short_count(n: float) -> str:
    """124439808 -> '124.4M'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:.4g}"


def ms(seconds_ms: float) -> str:
    return f"{seconds_ms:.3g}"


def nbytes(n: float) -> str:
    """Binary units, compact: 1536 -> '1.5K', 2.79 GiB -> '2.79G'."""
    for scale, suffix in ((2**40, "T"), (2**30, "G"), (2**20, "M"), (2**10, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{int(n)}B"


def flop(n: float) -> str:
    return f"{n:.3g}" if n >= 1e15 else short_count(n)


def console() -> Console:
    """A console as wide as the terminal, or 160 columns when the output is not a terminal (a pipe or
    a file), so the tables are not squeezed to rich's default of 80."""
    return Console() if sys.stdout.isatty() else Console(width=160)


def fmt(key: str, value: Any) -> str:
    """One quantity of QUANTITIES as text."""
    if value is None:
        return "-"
    if key.startswith("memory."):
        return nbytes(value)
    if key.startswith("flops."):
        return flop(value)
    if key.startswith("params."):
        return short_count(value)
    if key == "derived.aspect_ratio":
        return f"{value:.1f}"
    if key.endswith("_ms"):
        return ms(value)
    if key == "latency.tokens_per_s":
        return f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _lint_codes(record: dict[str, Any]) -> str:
    codes = sorted({f["code"] for f in record["lint"]})
    return " ".join(codes) if codes else "ok"


def _budget_text(family: dict[str, Any]) -> str:
    what = {"params": "parameters", "non_embedding_params": "non-embedding parameters",
            "train_flops": "training FLOPs"}[family["target_name"]]
    text = f"{short_count(family['target']) if family['target'] < 1e15 else format(family['target'], '.3g')} {what}"
    if family["kind"] == "iso-compute":
        text += (f", {family['tokens_per_param']:g} tokens/param" if family["tokens_per_param"]
                 else f", {short_count(family['tokens'])} tokens")
    return text


def plan_tables(result: dict[str, Any]) -> list[Table]:
    """The family's shapes (sizes, budget error, lint) and their costs (FLOPs, memory, latency)."""
    fam, wl, hw = result["family"], result["workload"], result["hardware"]
    members = result["members"]
    shapes = Table(title=f"{fam['kind']} family at {_budget_text(fam)} (tolerance {fam['tolerance']:.0%}), "
                         f"depth span {fam['depth_span']:.1f}x", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("shape", "layers", "width", "heads", "kv", "d_ff", "params", "error", "non-emb", "d/L"):
        shapes.add_column(col, justify="left" if col == "shape" else "right")
    if fam["kind"] == "iso-compute":
        shapes.add_column("train FLOPs", justify="right")
        shapes.add_column("tokens", justify="right")
        shapes.add_column("N vs 6ND", justify="right")
    shapes.add_column("lint")
    for m in members:
        s, plan = m["shape"], m["plan"]
        label = m["derived"]["label"] + (f" {PARETO_MARK}" if plan["pareto"] else "")
        row = [label, str(s["n_layers"]), str(s["d_model"]), str(s["n_heads"]), str(s["n_kv_heads"]),
               str(s["d_ff"]), short_count(m["params"]["total"]), f"{plan['error']:+.2%}",
               short_count(m["params"]["non_embedding"]), f"{m['derived']['aspect_ratio']:.1f}"]
        if fam["kind"] == "iso-compute":
            row += [f"{plan['train_flops']:.3g}", short_count(plan["tokens"]), f"{plan.get('params_vs_6nd', 0):+.1%}"]
        row.append(_lint_codes(m))
        shapes.add_row(*row)
    costs = Table(title=f"Costs on {hw['name']} ({wl['dtype']}, seq {wl['seq_len']}, batch {wl['batch']}, "
                        f"tp {wl['tp']}, pp {wl['pp']}); bytes in KiB/MiB/GiB", title_justify="left",
                  box=box.SIMPLE_HEAD)
    cols = [("shape", None), ("train FLOP/tok", "flops.train_per_token"),
            ("train mem/device", "memory.total_training_bytes"), ("act/layer", "memory.activation_bytes_per_layer"),
            ("KV/token", "memory.kv_cache_bytes_per_token"), ("prefill ms", "latency.prefill_ms"),
            ("decode ms/tok", "latency.decode_ms"), (f"tok/s @{wl['batch']}", "latency.tokens_per_s")]
    for name, _ in cols:
        costs.add_column(name, justify="left" if name == "shape" else "right")
    for m in members:
        label = m["derived"]["label"] + (f" {PARETO_MARK}" if m["plan"]["pareto"] else "")
        costs.add_row(label, *[fmt(key, value_at(m, key)) for _, key in cols[1:]])
    return [shapes, costs]


def plan_notes(result: dict[str, Any]) -> list[str]:
    """Lines under the tables: the Pareto mark, dropped candidates, lint findings, notes."""
    fam = result["family"]
    lines = [f"{PARETO_MARK} Pareto-best on (decode ms/token at batch 1, training memory per device)."]
    lines += [f"note: {n}" for n in fam["notes"]]
    for d in fam["dropped"]:
        lines.append(f"dropped: {d['reason']}")
    seen = set()
    for m in result["members"]:
        for f in m["lint"]:
            text = f"lint {m['derived']['label']}: {f['code']} {f['message']}; fix: {f['fix']}"
            if text not in seen:
                seen.add(text)
                lines.append(text)
    return lines


def compare_table(result: dict[str, Any]) -> Table:
    """Quantities as rows, shapes as columns, then each shape's ratio to the first."""
    shapes, ratios, wl, hw = result["shapes"], result["ratios_to_first"], result["workload"], result["hardware"]
    table = Table(title=f"Compared on {hw['name']} ({wl['dtype']}, seq {wl['seq_len']}, batch {wl['batch']}, "
                        f"tp {wl['tp']}, pp {wl['pp']}); bytes in KiB/MiB/GiB", title_justify="left",
                  box=box.SIMPLE_HEAD)
    table.add_column("quantity", style="bold")
    for s in shapes:
        table.add_column(s["name"] if s["name"] == s["derived"]["label"] else f"{s['name']}\n{s['derived']['label']}",
                         justify="right")
    first = shapes[0]["name"]
    for r in ratios:
        table.add_column(f"{r['name']} / {first}", justify="right", style="cyan")
    for label, key in QUANTITIES:
        row = [label] + [fmt(key, value_at(s, key)) for s in shapes]
        row += ["-" if r[key] is None else f"{r[key]:.3g}x" for r in ratios]
        table.add_row(*row)
    table.add_row("lint", *[_lint_codes(s) for s in shapes], *["" for _ in ratios])
    return table


def compare_notes(result: dict[str, Any]) -> list[str]:
    lines = []
    for s in result["shapes"]:
        for f in s["lint"]:
            lines.append(f"lint {s['name']}: {f['code']} {f['message']}; fix: {f['fix']}")
    return lines


__all__ = ["compare_notes", "compare_table", "console", "fmt", "plan_notes", "plan_tables", "short_count"]
