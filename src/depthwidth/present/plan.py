"""Rich tables of `depthwidth plan` and `depthwidth compare` results.

Input is the plain dicts of `PlanResult.to_dict()` / `Comparison.to_dict()`, so stored JSON renders
the same way. Two tables per plan (the shapes; their costs) keep each one readable at 120 columns.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from depthwidth.present.units import count, flops, integer, nbytes, number, percent, ratio
from depthwidth.shapes.evaluate import QUANTITIES, value_at

PARETO_MARK = "*"
BUDGET_NAMES = {"params": "parameters", "non_embedding_params": "non-embedding parameters",
                "train_flops": "training compute"}


def fmt(key: str, value: Any) -> str:
    """One quantity of QUANTITIES as text."""
    if value is None:
        return "-"
    if key.startswith("memory."):
        return nbytes(value)
    if key.startswith("flops."):
        return flops(value)
    if key.startswith("params."):
        return count(value)
    if key == "derived.aspect_ratio":
        return f"{value:.1f}"
    if key.endswith("_ms") or key == "latency.tokens_per_s":
        return number(value)
    return integer(value) if isinstance(value, int) else f"{value:.4g}"


def budget_text(family: dict[str, Any]) -> str:
    """'124M parameters', '10 EFLOP training compute, 20 tokens/param' (of `Family.to_dict()`)."""
    amount = flops(family["target"]) if family["target_name"] == "train_flops" else count(family["target"])
    text = f"{amount} {BUDGET_NAMES[family['target_name']]}"
    if family["kind"] == "iso-compute":
        text += (f", {family['tokens_per_param']:g} tokens/param" if family["tokens_per_param"]
                 else f", {count(family['tokens'])} tokens")
    return text


def _lint_codes(record: dict[str, Any]) -> str:
    codes = sorted({f["code"] for f in record["lint"]})
    return " ".join(codes) if codes else "ok"


def plan_tables(result: dict[str, Any]) -> list[Table]:
    """The family's shapes (sizes, budget error, lint) and their costs (FLOPs, memory, latency)."""
    fam, wl, hw = result["family"], result["workload"], result["hardware"]
    members = result["members"]
    tolerance = percent(fam["tolerance"], digits=0)
    shapes = Table(title=f"{fam['kind']} family at {budget_text(fam)} (tolerance {tolerance}), "
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
               str(s["d_ff"]), count(m["params"]["total"]), percent(plan["error"], digits=2, sign=True),
               count(m["params"]["non_embedding"]), f"{m['derived']['aspect_ratio']:.1f}"]
        if fam["kind"] == "iso-compute":
            row += [flops(plan["train_flops"]), count(plan["tokens"]),
                    percent(plan.get("params_vs_6nd", 0), sign=True)]
        row.append(_lint_codes(m))
        shapes.add_row(*row)
    costs = Table(title=f"Costs on {hw['name']} ({wl['dtype']}, seq {wl['seq_len']}, batch {wl['batch']}, "
                        f"tp {wl['tp']}, pp {wl['pp']})", title_justify="left", box=box.SIMPLE_HEAD)
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
                        f"tp {wl['tp']}, pp {wl['pp']})", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("quantity", style="bold")
    for s in shapes:
        table.add_column(s["name"] if s["name"] == s["derived"]["label"] else f"{s['name']}\n{s['derived']['label']}",
                         justify="right")
    first = shapes[0]["name"]
    for r in ratios:
        table.add_column(f"{r['name']} / {first}", justify="right", style="cyan")
    for label, key in QUANTITIES:
        row = [label] + [fmt(key, value_at(s, key)) for s in shapes]
        row += ["-" if r[key] is None else ratio(r[key]) for r in ratios]
        table.add_row(*row)
    table.add_row("lint", *[_lint_codes(s) for s in shapes], *["" for _ in ratios])
    return table


def compare_notes(result: dict[str, Any]) -> list[str]:
    lines = []
    for s in result["shapes"]:
        for f in s["lint"]:
            lines.append(f"lint {s['name']}: {f['code']} {f['message']}; fix: {f['fix']}")
    return lines


__all__ = ["PARETO_MARK", "budget_text", "compare_notes", "compare_table", "fmt", "plan_notes", "plan_tables"]
