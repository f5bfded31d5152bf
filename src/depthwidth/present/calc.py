"""Rich tables of one shape's summary (`depthwidth.shapes.summary.Summary.to_dict()`) and of the
preset list. Input is plain dicts, so a stored JSON summary renders the same way; no torch."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from depthwidth.present.units import count, flops, integer, nbytes, percent


def _table(title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    table.add_column("note", style="dim")
    return table


def shape_table(result: dict[str, Any]) -> Table:
    s, d = result["shape"], result["derived"]
    t = _table(f"Shape {d['label']}")
    heads = f"{s['n_heads']} x {s['head_dim']}"
    if s["n_kv_heads"] != s["n_heads"]:
        heads += f" ({s['n_kv_heads']} kv)"
    head = "tied" if s["tie_embeddings"] else ("untied" if s["lm_head"] else "no LM head")
    rows = [
        ("layers x width", f"{s['n_layers']} x {s['d_model']}", f"aspect ratio d/L = {d['aspect_ratio']:.1f}"),
        ("heads", heads, "query heads x head_dim"),
        ("MLP", f"{s['ffn']} {s['d_ff']}", f"{s['d_ff'] / s['d_model']:.2f} x d_model"),
        ("norm / bias", f"{s['norm']} ({s['norm_position']}) / {s['bias']}", ""),
        ("positions / context", f"{s['pos']} / {integer(s['max_seq_len'])}",
         "parallel residual" * s["parallel_residual"]),
        ("vocab / head", integer(s["vocab_size"]), head),
        ("kind", s["kind"], ""),
    ]
    for row in rows:
        t.add_row(*row)
    return t


def params_table(result: dict[str, Any]) -> Table:
    p = result["params"]
    t = _table("Parameters")
    for key in ("embedding", "position", "attention", "mlp", "norms", "head"):
        if p[key]:
            t.add_row(key, count(p[key], exact=True), percent(p[key] / p["total"]))
    t.add_row("total", count(p["total"], exact=True), "")
    t.add_row("non-embedding", count(p["non_embedding"], exact=True), "Kaplan et al. 2020 convention")
    t.add_row("per layer", count(p["per_layer"], exact=True), f"c = per_layer / d^2 = {p['per_layer_constant']:.3f}")
    published = (result.get("preset") or {}).get("published_params")
    if published:
        t.add_row("published", integer(published), "matches" if published == p["total"] else "DIFFERS")
    return t


def flops_table(result: dict[str, Any]) -> Table:
    f, st = result["flops"], result["settings"]
    t = _table(f"FLOPs (seq_len {integer(st['seq_len'])}, {f['attention']} attention, recompute {f['recompute']})")
    t.add_row("forward / token", flops(f["forward_per_token"]), "2 per multiply-add, matmuls only")
    t.add_row("train / token", flops(f["train_per_token"]), "3 x forward (model FLOPs, for MFU)")
    if f["hardware_train_per_token"] != f["train_per_token"]:
        t.add_row("train / token, hardware", flops(f["hardware_train_per_token"]), "with recomputation")
    t.add_row("forward / sequence", flops(f["forward_per_sequence"]), "")
    t.add_row("train / sequence", flops(f["train_per_sequence"]), "")
    return t


def memory_table(result: dict[str, Any]) -> Table:
    m, st, s = result["memory"], result["settings"], result["shape"]
    t = _table(
        f"Memory per device ({st['train_precision']}, {st['optimizer']}, ZeRO {st['zero_stage']}, "
        f"dp {st['dp']}, tp {st['tp']}, pp {st.get('pp', 1)}, micro-batch {st['micro_batch']}, "
        f"recompute {st['recompute']})"
    )
    for key, note in (
        ("params_bytes", "parameters"),
        ("grads_bytes", "gradients"),
        ("optimizer_bytes", "optimizer state (and master weights)"),
        ("model_states_bytes", "model states"),
        ("activation_bytes_per_layer", "activations, one layer"),
        ("block_activation_bytes", "activations saved by the blocks"),
        ("kept_activation_bytes", "activations saved for backward"),
        ("activation_bytes", "activations, with recompute working set"),
        ("total_training_bytes", "training total"),
        ("kv_cache_bytes_per_token", f"KV cache per token ({st['kv_dtype']})"),
        ("kv_cache_bytes", f"KV cache, batch {st['micro_batch']} x {integer(st['seq_len'])} tokens"),
    ):
        if key in m and m[key] is not None:
            t.add_row(note, nbytes(m[key]), f"{integer(m[key])} B")
    if s["kind"] == "encoder":
        t.add_row("", "", "an encoder keeps no KV cache between calls; shown for one full pass")
    return t


def summary_tables(result: dict[str, Any]) -> list[Table]:
    from depthwidth.present.pipeline import pipeline_table

    tables = [shape_table(result), params_table(result), flops_table(result), memory_table(result)]
    pipeline = result["memory"].get("pipeline")
    return tables + ([pipeline_table(pipeline)] if pipeline and pipeline["pp"] > 1 else [])


def presets_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Presets (depthwidth calc --preset NAME)")
    for col in ("name", "shape", "params", "published", "source"):
        table.add_column(col, justify="right" if col in ("params", "published") else "left", overflow="fold")
    for r in rows:
        published = r["published_params"]
        mark = "" if published is None else ("= " if published == r["params"] else "!= ") + integer(published)
        table.add_row(r["name"], r["label"], integer(r["params"]), mark, r["source"].split(";")[0])
    return table


__all__ = ["flops_table", "memory_table", "params_table", "presets_table", "shape_table", "summary_tables"]
