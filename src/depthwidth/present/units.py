"""How depthwidth writes a quantity: every table, plot label and message uses these, so a number looks
the same wherever it appears.

One style:
- A value with a unit has three significant digits, a space and the unit: `nbytes` in binary prefixes
  ("2.79 GiB", "27.1 MiB", "36 KiB", "512 B"), `flops` and `flops_per_s` in decimal SI prefixes
  ("798 MFLOP", "10 EFLOP", "430 GFLOP/s"), `bandwidth` in decimal prefixes as datasheets quote it
  ("3.35 TB/s"), `duration` from nanoseconds to seconds ("2.18 ms", "32.1 us"), then as a clock ("1:02:05").
- A count (parameters, tokens) has four significant digits and a suffix K/M/B/T with no space
  ("124.4M", "85.06M", "7B"): the members of one iso-parameter family differ by a few percent, which
  three digits would hide. `count(n, exact=True)` adds the exact integer: "124.4M (124,439,808)".
- Where a column's header names the unit ("prefill ms", "tok/s", "GB/s") the cell is a bare `number`:
  three significant digits, thousands separators from 1,000 on, never an exponent ("2.18", "51,200").
- `integer` writes an exact count ("124,439,808"), `percent` a fraction ("41.3%"), `ratio` a
  quotient ("1.80x"); `or_dash` writes "-" for a missing value.
A prefix is chosen after rounding, so 999,999 is "1M", not "1000K".
"""

from __future__ import annotations

from typing import Callable

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

_COUNT = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"), (1.0, ""))
_BINARY = ((2**50, "Pi"), (TiB, "Ti"), (GiB, "Gi"), (MiB, "Mi"), (KiB, "Ki"), (1, ""))
_DECIMAL = ((1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"), (1.0, ""))
_SECONDS = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))


def _scaled(value: float, steps: tuple[tuple[float, str], ...], *, digits: int) -> tuple[str, str]:
    """(digits, prefix): `value` in the largest step it reaches once rounded to `digits` significant digits."""
    for size, prefix in steps:
        text = f"{value / size:.{digits}g}"
        if abs(float(text)) >= 1:
            break
    if "e" in text:  # beyond the largest prefix, or a zero-sized step
        text = f"{value / size:,.0f}"
    return text, prefix


def integer(n: float) -> str:
    """An exact count: 124439808 -> '124,439,808' (a float is rounded to the nearest integer)."""
    return f"{round(n):,}"


def count(n: float, *, exact: bool = False) -> str:
    """Parameters, tokens: 124439808 -> '124.4M'; with exact, '124.4M (124,439,808)'."""
    text, prefix = _scaled(n, _COUNT, digits=4)
    short = text + prefix
    return f"{short} ({integer(n)})" if exact and prefix else short


def nbytes(n: float) -> str:
    """Bytes in binary prefixes: 2.79 * 2**30 -> '2.79 GiB', 36864 -> '36 KiB', 512 -> '512 B'."""
    text, prefix = _scaled(n, _BINARY, digits=3)
    return f"{text} {prefix}B"


def flops(n: float) -> str:
    """Floating-point operations: 7.98e8 -> '798 MFLOP', 1e19 -> '10 EFLOP'."""
    text, prefix = _scaled(n, _DECIMAL, digits=3)
    return f"{text} {prefix}FLOP"


def flops_per_s(n: float) -> str:
    """A compute rate: 4.3e11 -> '430 GFLOP/s'."""
    return flops(n) + "/s"


def bandwidth(bytes_per_s: float) -> str:
    """Memory or link bandwidth in decimal prefixes, as datasheets quote it: 3.35e12 -> '3.35 TB/s'."""
    text, prefix = _scaled(bytes_per_s, _DECIMAL, digits=3)
    return f"{text} {prefix}B/s"


def clock(seconds: float) -> str:
    """h:mm:ss: 3725 -> '1:02:05'."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def duration(seconds: float) -> str:
    """0.00218 -> '2.18 ms', 3.21e-5 -> '32.1 us', 12.3 -> '12.3 s'; a minute or more as a clock."""
    if seconds == 0:
        return "0 s"
    if abs(seconds) >= 59.95:
        return clock(seconds)
    text, prefix = _scaled(seconds, _SECONDS, digits=3)
    return f"{text} {prefix}s"


def number(value: float) -> str:
    """A bare value whose unit the header names: 2.1837 -> '2.18', 51234.5 -> '51,234', 0.5 -> '0.5'."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def percent(fraction: float, *, digits: int = 1, sign: bool = False) -> str:
    """0.4132 -> '41.3%'; sign=True -> '+41.3%'."""
    return f"{fraction:{'+' if sign else ''}.{digits}%}"


def ratio(value: float) -> str:
    """1.8 -> '1.80x'."""
    return f"{value:.2f}x"


def or_dash(value, fmt: str | Callable[[float], str] = number) -> str:
    """'-' for None, else `value` written with `fmt` (a format spec such as '.4f', or one of these functions)."""
    if value is None:
        return "-"
    return format(value, fmt) if isinstance(fmt, str) else fmt(value)


__all__ = ["GiB", "KiB", "MiB", "TiB", "bandwidth", "clock", "count", "duration", "flops", "flops_per_s", "integer",
           "nbytes", "number", "or_dash", "percent", "ratio"]
