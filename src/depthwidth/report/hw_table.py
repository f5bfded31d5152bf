"""Rich tables of the hardware table (`HardwareSpec.to_dict()` rows) and of a measured profile."""

from __future__ import annotations

from typing import Any

from rich.table import Table

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _tflops(value: float | None) -> str:
    if value is None:
        return "-"
    tf = value / 1e12
    return f"{tf:,.0f}" if tf >= 100 else (f"{tf:.3g}" if tf >= 1 else f"{tf:.2g}")


def hardware_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Hardware (dense peak TFLOP/s; int8 in TOP/s)", title_justify="left")
    table.add_column("name", style="bold")
    for d in DTYPES:
        table.add_column(d, justify="right")
    for col in ("HBM GB/s", "memory GB", "link GB/s", "eff flop/bw", "MFU", "per-op us"):
        table.add_column(col, justify="right")
    for r in rows:
        peaks = r["peak_flops"]
        table.add_row(
            r["name"], *[_tflops(peaks.get(d)) for d in DTYPES], f"{r['mem_bandwidth'] / 1e9:,.0f}",
            f"{r['mem_capacity'] / 1e9:,.0f}", f"{r['link_bandwidth'] / 1e9:,.0f}" if r["link_bandwidth"] else "-",
            f"{r['flops_efficiency']:.2f}/{r['bandwidth_efficiency']:.2f}", f"{r['train_mfu']:.2f}",
            f"{r['op_overhead_s'] * 1e6:.3g}",
        )
    return table


def profile_table(p: dict[str, Any]) -> Table:
    table = Table(title=f"Measured: {p['device_name']} ({p['device']}, {p['threads']} threads, torch "
                        f"{p['torch_version']}{', quick' if p['quick'] else ''})", title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    table.add_column("note", style="dim")
    for g in p["gemm"]:
        best = p["peak_flops"].get(g["dtype"]) == g["flops_per_s"]
        table.add_row(f"GEMM {g['dtype']} {g['path']}", f"{g['flops_per_s'] / 1e9:,.0f} GFLOP/s",
                      f"n={g['n']}" + (", peak" if best else ""))
    table.add_row("memory copy", f"{p['copy_bandwidth'] / 1e9:,.1f} GB/s", "bytes read + written")
    table.add_row("per-op cost", f"{p['op_overhead_s'] * 1e6:.2f} us",
                  ", ".join(f"{k} {v * 1e6:.2g}" for k, v in p["op_overheads"].items()))
    table.add_row("memory", f"{p['mem_capacity'] / 2**30:,.1f} GiB", "")
    return table


__all__ = ["hardware_table", "profile_table"]
