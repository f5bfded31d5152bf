"""Rich tables of a serving benchmark: measured, predicted and measured/predicted side by side.

Input is `BenchResult.to_dict()` (so a stored JSON result renders the same way); nothing here
imports torch.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from depthwidth.present.units import integer, number, or_dash, ratio


def _ms(seconds: float | None) -> str:
    """Seconds as the bare milliseconds of a column titled in ms."""
    return or_dash(None if seconds is None else seconds * 1e3)


def summary_line(result: dict[str, Any]) -> str:
    env, hw = result["environment"], result["hardware"]
    return (
        f"{result['target']}  |  torch {env['torch']}, {env['threads']} threads, variants "
        f"{', '.join(env['variants'])}, quantized engine {env['quantized_engine']}  |  predicted for "
        f"profile {hw.get('name', '?')}"
    )


def latency_table(result: dict[str, Any]) -> Table:
    table = Table(title="Batch-1 latency: prefill (time to first token) and one decode step")
    for col in ("variant", "step", "tokens", "measured ms", "q1-q3 ms", "min-max ms", "predicted ms", "ratio"):
        table.add_column(col, justify="left" if col in ("variant", "step") else "right")
    for p in result["latency"]:
        s = p["seconds"]
        table.add_row(
            p["variant"],
            p["kind"] if p["kind"] == "prefill" else "decode @ctx",
            str(p["tokens"]),
            _ms(s["median"]),
            f"{_ms(s['q1'])}-{_ms(s['q3'])}",
            f"{_ms(s['min'])}-{_ms(s['max'])}",
            _ms(p["predicted_s"]),
            or_dash(p["ratio"], ratio),
        )
    return table


def throughput_table(result: dict[str, Any]) -> Table:
    rows = result["throughput"]
    first = rows[0] if rows else {"prompt_len": "-", "new_tokens": "-"}
    table = Table(title=f"Generation throughput (prompt {first['prompt_len']}, {first['new_tokens']} new tokens, "
                        "prefill included)")
    for col in ("variant", "batch", "measured tok/s", "q1-q3 s", "predicted tok/s", "ratio (time)"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for p in rows:
        s = p["seconds"]
        pred = p["predicted_tokens_per_s"]
        table.add_row(
            p["variant"], str(p["batch"]), number(p["tokens_per_s"]), f"{number(s['q1'])}-{number(s['q3'])}",
            or_dash(pred), or_dash(p["ratio"], ratio),
        )
    return table


def kv_cache_table(result: dict[str, Any]) -> Table:
    table = Table(title="KV cache: bytes of the cache tensors vs analytic 2*L*n_kv*head_dim*bytes*tokens*batch")
    for col in ("variant", "dtype", "batch", "tokens", "measured bytes", "analytic bytes", "equal"):
        table.add_column(col, justify="left" if col in ("variant", "dtype", "equal") else "right")
    for c in result["kv_cache"]:
        table.add_row(c["variant"], c["dtype"], str(c["batch"]), str(c["tokens"]), integer(c["measured_bytes"]),
                      integer(c["analytic_bytes"]), "yes" if c["equal"] else "NO")
    return table


def quantization_table(result: dict[str, Any]) -> Table | None:
    q = result.get("quantization")
    if not q:
        return None
    table = Table(title="int8 dynamic quantization of the Linear layers")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("quantized Linear layers", str(q["quantized_linears"]))
    table.add_row("weight bytes fp32 -> int8",
                  f"{integer(q['weight_bytes_before'])} -> {integer(q['weight_bytes_after'])}")
    if q["val_loss_before"] is None:
        table.add_row("validation loss change", "- (random weights: speed only)")
    else:
        table.add_row("validation loss fp32 -> int8",
                      f"{q['val_loss_before']:.4f} -> {q['val_loss_after']:.4f} ({q['val_loss_change']:+.4f})")
    findings = q["lint_findings"] or [f"none: every quantized dimension divides group size {q['group_size']}"]
    for i, text in enumerate(findings):
        table.add_row("lint (group size)" if i == 0 else "", text)
    return table


def bench_tables(result: dict[str, Any]) -> list[Table]:
    """The tables of one result, in reading order (empty sections left out)."""
    tables = [latency_table(result)]
    if result["throughput"]:
        tables.append(throughput_table(result))
    tables.append(kv_cache_table(result))
    quant = quantization_table(result)
    if quant is not None:
        tables.append(quant)
    return tables


__all__ = ["bench_tables", "kv_cache_table", "latency_table", "quantization_table", "summary_line",
           "throughput_table"]
