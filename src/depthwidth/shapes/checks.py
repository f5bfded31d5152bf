"""Argument checks shared by the analytic core: each raises a ValueError that names the field, the
value and what is allowed."""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError


def check_int(name: str, value: Any, low: int = 1) -> None:
    """An int (not a bool) >= `low`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise UserError(f"{name}={value!r} must be {what}")


def check_choice(name: str, value: Any, allowed: tuple) -> None:
    """One of `allowed` (a bool never counts as 0 or 1)."""
    if isinstance(value, bool) or value not in allowed:
        raise UserError(f"{name}={value!r} is not allowed; expected one of {', '.join(map(str, allowed))}")
