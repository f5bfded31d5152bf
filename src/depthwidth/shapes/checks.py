"""Argument checks shared by the analytic core: each raises a UserError (a ValueError) that names the field, the
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
