"""Validation of TOML tables against frozen dataclasses, with errors that name the file, the line and
the key path.

Each section of a study spec is a frozen, keyword-only dataclass whose fields carry a checker in their
metadata (`checked(...)`). `build(cls, raw, key=...)` rejects unknown keys, fills defaults, converts and
checks every value, and raises `SpecError` naming the key path (`train.tokens`, `budget[1].count`) and
what was expected. `locate(text, key)` finds the line of a key path in the TOML source; tomllib does not
report positions, so this is a line scan that understands `[table]`, `[[array]]` and `key = value` lines
(it returns None for keys it cannot place, such as those inside inline tables).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from depthwidth.errors import UserError, echo, echo_repr
from depthwidth.shapes.checks import shown


class SpecError(UserError):
    """A study spec that cannot run; its text is one line: 'FILE:LINE: KEY: what is wrong'."""

    def __init__(self, message: str, *, source: str = "<spec>", key: str = "", line: int | None = None) -> None:
        self.source, self.key, self.line, self.message = source, key, line, message
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {echo(key)}: {message}" if key else f"{where}: {message}")

    def located(self, *, source: str, text: str | None) -> SpecError:
        """The same error with the file name and, when it can be found, the line."""
        line = self.line if self.line is not None or text is None else locate(text, self.key)
        return SpecError(self.message, source=source, key=self.key, line=line)


class _Bad(Exception):
    """Raised by a checker: the text says what was expected."""


Checker = Callable[[Any], Any]


def checked(check: Checker, default: Any = dataclasses.MISSING, *, doc: str = "") -> Any:
    """A dataclass field whose TOML value is validated and converted by `check`."""
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples for sequence defaults")
    return dataclasses.field(default=default, metadata={"check": check, "doc": doc})


def _describe(value: Any) -> str:
    """A spec value as a message quotes it: its repr, cut by `echo_repr`, and its TOML type."""
    kind = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "table"}
    return f"{echo_repr(value)} ({kind.get(type(value), type(value).__name__)})"


# ---- checkers --------------------------------------------------------------------------------------
def _why(why: str) -> str:
    return f" ({why})" if why else ""


def integer(minimum: int = 1, maximum: int | None = None, *, why: str = "") -> Checker:
    """An int (not a bool) in [minimum, maximum]; `why` says what the upper bound is, for the message."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad(f"expected an integer >= {minimum}, got {_describe(value)}")
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"in [{minimum}, {maximum:,}]{_why(why)}" if maximum is not None else f">= {minimum}"
            raise _Bad(f"expected an integer {bound}, got {shown(value)}")
        return value

    return check


def number(minimum: float = 0.0, *, inclusive: bool = False, maximum: float | None = None, why: str = "") -> Checker:
    """A finite int or float, > minimum (>= with inclusive), <= maximum (`why`: the reason of that bound)."""

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _Bad(f"expected a finite number, got {_describe(value)}")
        low_ok = value >= minimum if inclusive else value > minimum
        if not low_ok or (maximum is not None and value > maximum):
            bound = (">= " if inclusive else "> ") + f"{minimum:g}"
            if maximum is not None:
                bound += f" and <= {maximum:g}{_why(why)}"
            raise _Bad(f"expected a number {bound}, got {shown(value)}")
        return float(value)

    return check


def text(pattern: str | None = None, *, what: str = "a string") -> Checker:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise _Bad(f"expected {what}, got {_describe(value)}")
        if pattern is not None and not re.fullmatch(pattern, value):
            raise _Bad(f"expected {what}, got {echo_repr(value)}")
        return value

    return check


def choice(options: Sequence[str]) -> Checker:
    """One of `options` (the owner's tuple, kept on the checker as `check.options`)."""
    options = tuple(options)

    def check(value: Any) -> str:
        if value not in options:
            raise _Bad(f"expected one of {', '.join(repr(o) for o in options)}, got {_describe(value)}")
        return value

    check.options = options  # type: ignore[attr-defined]
    return check


def integer_or(check: Checker, words: Sequence[str], *, what: str) -> Checker:
    """An integer checked by `check`, or one of the strings `words` (`what`: the allowed values in words,
    for the message: "0, 2, 4 or 'adapt'")."""
    words = tuple(words)

    def accept(value: Any) -> int | str:
        if isinstance(value, str):
            if value in words:
                return value
            raise _Bad(f"expected {what}, got {_describe(value)}")
        try:
            return check(value)
        except _Bad:
            raise _Bad(f"expected {what}, got {_describe(value)}") from None

    return accept


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"expected true or false, got {_describe(value)}")
    return value


def optional(check: Checker) -> Checker:
    """Absent (None) is allowed; TOML has no null, so only the default can be None."""
    return lambda value: None if value is None else check(value)


def array(item: Checker, *, min_len: int = 1, max_len: int | None = None, why: str = "",
          unique: bool = False) -> Checker:
    """A TOML array of `min_len` to `max_len` values (`why`: the reason of that bound), each checked by `item`."""

    def check(value: Any) -> tuple:
        if not isinstance(value, list):
            raise _Bad(f"expected an array, got {_describe(value)}")
        if len(value) < min_len:
            raise _Bad(f"expected an array of at least {min_len} value(s), got {len(value)}")
        if max_len is not None and len(value) > max_len:
            raise _Bad(f"expected an array of at most {max_len:,} values{_why(why)}, got {len(value):,}")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(item(v))
            except _Bad as exc:
                raise _Bad(f"item {i}: {exc}") from None
        if unique and len(set(out)) != len(out):
            raise _Bad(f"expected distinct values, got {shown(value)}")
        return tuple(out)

    return check


# ---- building dataclasses from tables ---------------------------------------------------------------
def build(cls: type, raw: Any, *, key: str, source: str = "<spec>") -> Any:
    """Instantiate `cls` from the TOML table `raw` (key path `key` for error messages)."""
    if not isinstance(raw, dict):
        raise SpecError(f"expected a table, got {_describe(raw)}", source=source, key=key)
    spec_fields = {f.name: f for f in dataclasses.fields(cls) if "check" in f.metadata}
    unknown = [k for k in raw if k not in spec_fields]
    if unknown:
        raise SpecError(
            f"unknown key {echo_repr(unknown[0])}; expected one of {', '.join(sorted(spec_fields))}",
            source=source, key=_join(key, unknown[0]),
        )
    values = {}
    for name, f in spec_fields.items():
        if name not in raw:
            if f.default is dataclasses.MISSING:
                raise SpecError(f"missing required key ({f.metadata['doc'] or 'no default'})",
                                source=source, key=_join(key, name))
            values[name] = f.default
            continue
        try:
            values[name] = f.metadata["check"](raw[name])
        except _Bad as exc:
            raise SpecError(str(exc), source=source, key=_join(key, name)) from None
    try:
        return cls(**values)
    except SpecError:
        raise
    except ValueError as exc:  # a cross-field rule in __post_init__
        raise SpecError(str(exc), source=source, key=key) from None


def check_value(check: Checker, value: Any, *, key: str, source: str = "<spec>") -> Any:
    """Run one checker on one value, raising SpecError for `key`."""
    try:
        return check(value)
    except _Bad as exc:
        raise SpecError(str(exc), source=source, key=key) from None


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


# ---- line lookup -----------------------------------------------------------------------------------
_KEY_RE = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=""")
_TABLE_RE = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_PART_RE = re.compile(r"([^.\[\]]+)(?:\[(\d+)\])?")


def locate(text: str, key: str) -> int | None:
    """1-based line of `key` ('train.tokens', 'budget[1].count', 'name') in TOML `text`, or of the
    closest enclosing table header; None when not found."""
    if not key:
        return None
    parts: list[tuple[str, int | None]] = [(m.group(1), int(m.group(2)) if m.group(2) else None)
                                           for m in _PART_RE.finditer(key)]
    # Candidate splits: table path = parts[:k], key = parts[k] (remaining parts may be nested tables).
    current: list[tuple[str, int | None]] = []
    counters: dict[str, int] = {}
    best: int | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        table = _TABLE_RE.match(line)
        if table:
            names = [n.strip().strip('"\'') for n in table.group(2).split(".")]
            path = ".".join(names)
            if table.group(1) == "[[":
                index = counters.get(path, 0)
                counters[path] = index + 1
                current = [(n, None) for n in names[:-1]] + [(names[-1], index)]
            else:
                current = [(n, None) for n in names]
            if _prefix(current, parts):
                best = lineno
            continue
        m = _KEY_RE.match(line)
        if m:
            name = next(g for g in m.groups() if g is not None)
            here = current + [(name, None)]
            if _prefix(here, parts):
                return lineno
    return best


def _prefix(path: list[tuple[str, int | None]], parts: list[tuple[str, int | None]]) -> bool:
    if len(path) > len(parts):
        return False
    for (name, index), (want, want_index) in zip(path, parts):
        if name != want:
            return False
        if index is not None and want_index is not None and index != want_index:
            return False
    return True


__all__ = ["SpecError", "array", "boolean", "build", "check_value", "checked", "choice", "integer", "integer_or",
           "locate", "number", "optional", "text"]
