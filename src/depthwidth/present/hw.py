"""Rich tables of the hardware table (`HardwareSpec.to_dict()` rows) and of a measured profile."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from depthwidth.shapes.hardware import DTYPES
from depthwidth.present.units import bandwidth, duration, flops_per_s, nbytes, or_dash



def _scaled(value: float | None, scale: float) -> str:
    """A bare number in the unit of its column (`scale` of that unit)."""
    return or_dash(None if value is None else value / scale)


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
            r["name"], *[_scaled(peaks.get(d), 1e12) for d in DTYPES], _scaled(r["mem_bandwidth"], 1e9),
            _scaled(r["mem_capacity"], 1e9), _scaled(r["link_bandwidth"] or None, 1e9),
            f"{r['flops_efficiency']:.2f}/{r['bandwidth_efficiency']:.2f}", f"{r['train_mfu']:.2f}",
            _scaled(r["op_overhead_s"], 1e-6),
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
        table.add_row(f"GEMM {g['dtype']} {g['path']}", flops_per_s(g["flops_per_s"]),
                      f"n={g['n']}" + (", peak" if best else ""))
    table.add_row("memory copy", bandwidth(p["copy_bandwidth"]), "bytes read + written")
    table.add_row("per-op cost", duration(p["op_overhead_s"]),
                  ", ".join(f"{k} {duration(v)}" for k, v in p["op_overheads"].items()))
    table.add_row("memory", nbytes(p["mem_capacity"]), "")
    return table


__all__ = ["hardware_table", "profile_table"]
