"""Argument checks shared by the analytic core: each raises a UserError (a ValueError) that names the field, the
value and what is allowed."""

from __future__ import annotations

import math
from typing import Any

from depthwidth.errors import UserError


#: longest repr of a value that an error message quotes in full
SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """`value` as an error message shows it: its repr, an integer of more than 18 digits as its power
    of ten, anything longer than `SHOWN_CHARS` cut short (a hostile file's value is not worth a page)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**18:
        return f"{'-' if value < 0 else ''}~10^{int(math.log10(abs(value)))}"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def check_int(name: str, value: Any, low: int = 1, high: int | None = None, why: str = "") -> None:
    """An int (not a bool) >= `low` and, when given, <= `high`; `why` says what the upper bound is
    (e.g. "far deeper than any trained Transformer"), so the message explains the limit."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise UserError(f"{name}={shown(value)} must be {what}")
    if high is not None and value > high:
        raise UserError(f"{name}={shown(value)} is above the limit of {high:,}" + (f" ({why})" if why else ""))


def check_number(name: str, value: Any, *, low: float = 0.0, low_open: bool = True, high: float | None = None,
                 why: str = "") -> None:
    """A finite int or float (not a bool) > `low` (>= unless `low_open`) and <= `high` when given."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or not (value > low if low_open else value >= low):
        raise UserError(f"{name}={shown(value)} must be a finite number {'>' if low_open else '>='} {low:g}")
    if high is not None and value > high:
        raise UserError(f"{name}={shown(value)} is above the limit of {high:g}" + (f" ({why})" if why else ""))


def check_choice(name: str, value: Any, allowed: tuple) -> None:
    """One of `allowed` (a bool never counts as 0 or 1)."""
    if isinstance(value, bool) or value not in allowed:
        raise UserError(f"{name}={value!r} is not allowed; expected one of {', '.join(map(str, allowed))}")


#: The four fields of a budget, in the order `check_one_budget` takes their names.
BUDGET_FIELDS = ("params", "flops", "tokens", "tokens_per_param")


def check_one_budget(
    *, params: Any, flops: Any, tokens: Any, tokens_per_param: Any,
    names: tuple[str, str, str, str] = BUDGET_FIELDS,
) -> None:
    """Exactly one budget: `params` alone, or `flops` with exactly one of `tokens` and `tokens_per_param`
    (a training-compute budget needs the tokens D, given directly or as D = r N with r tokens per
    parameter, Hoffmann et al. 2022). A field counts as given when it is not None. `names` spells the
    four fields as the caller's user writes them (spec keys, or flags such as "--tokens-per-param"), in
    the order of `BUDGET_FIELDS`. Raises UserError naming the fields and which of them were given."""
    p, f, t, r = names
    values = (params, flops, tokens, tokens_per_param)
    given = [name for name, value in zip(names, values) if value is not None]
    n_tokens = (tokens is not None) + (tokens_per_param is not None)
    if params is not None and flops is None and n_tokens == 0:
        return
    if flops is not None and params is None and n_tokens == 1:
        return
    raise UserError(f"give one budget: {p} alone, or {f} with exactly one of {t} or {r} "
                    f"(got {', '.join(given) or 'none'})")
