"""One dict form for the package's frozen dataclasses: `to_dict` writes it, `from_dict` reads it back.

A result or a record is stored and printed as JSON (`--json`, study stores, report exports), so each
needs a plain dict of its fields. Spelling that dict out by hand in every class repeats every field
name twice and drifts from the class when a field is added; here it is derived from the class.

The dict form of a dataclass instance is its fields in declaration order, each value converted:

- a value with its own `to_dict()` (a nested record, or a class that shapes its dict by hand) -> that;
- any other dataclass instance -> its generic dict form;
- tuples and lists -> lists; mappings (MappingProxyType included) -> plain dicts; enums -> their value;
- anything else (numbers, strings, None, bools) as it is.

A field that needs something else says so in its metadata, `field(metadata=hook(...))`:
`key` writes it under another name, `skip` leaves it out, `omit_none` leaves it out when it is None,
`encode` / `decode` convert its value both ways, and `followed_by` names computed attributes (usually
properties) whose values are written right after it. Those computed keys are read-only: `from_dict`
accepts and ignores them, as they follow from the fields.

`from_dict(cls, data)` rebuilds the instance: nested dataclasses (through their own `from_dict` when
they have one), tuples, optional values, dict values and number keys are restored from the fields' type hints.
Keys that are neither a field nor a computed key are refused with a `UserError` naming them and
every known key, so a typo in a hand-edited file does not silently vanish; a missing field without a
default is refused the same way. `Serializable` gives a dataclass both as `to_dict()` and
`from_dict()` methods.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, TypeVar

from depthwidth.errors import UserError

#: the metadata key of a field's `Hook`
METADATA_KEY = "depthwidth.serial"

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Hook:
    """How one field deviates from the generic dict form (see the module docstring)."""

    key: str | None = None  # the dict key; None: the field's name
    skip: bool = False  # not in the dict form; `from_dict` leaves the field at its default
    omit_none: bool = False  # the key is left out when the value is None (read back as the default)
    encode: Callable[[Any], Any] | None = None  # value -> what the dict holds
    decode: Callable[[Any], Any] | None = None  # what the dict holds -> value
    followed_by: tuple[str, ...] = ()  # computed attributes written right after this field

    def __post_init__(self) -> None:
        if isinstance(self.followed_by, str):
            raise TypeError(f"followed_by={self.followed_by!r} must be a tuple of attribute names")


def hook(**options: Any) -> dict[str, Hook]:
    """Field metadata carrying a `Hook`: `field(metadata=hook(key="seconds"))`."""
    return {METADATA_KEY: Hook(**options)}


_PLAIN = Hook()


@functools.cache
def _plan(cls: type) -> tuple[tuple[dataclasses.Field, Hook], ...]:
    """Every field of `cls` with its hook, in declaration order."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    return tuple((f, f.metadata.get(METADATA_KEY, _PLAIN)) for f in dataclasses.fields(cls))


def encode(value: Any) -> Any:
    """The plain (JSON-ready when the leaves are) form of one value (module docstring: the rules)."""
    own = getattr(value, "to_dict", None)
    if own is not None and not isinstance(value, type) and callable(own):
        return own()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {(k.value if isinstance(k, Enum) else k): encode(v) for k, v in value.items()}
    return value


def to_dict(obj: Any, /, **overrides: Any) -> dict[str, Any]:
    """The dict form of the dataclass instance `obj`: its fields in declaration order, hooks applied.

    `overrides` replace the value of a key already written (keeping its place) or add keys at the end;
    they are converted like field values."""
    out: dict[str, Any] = {}
    for f, h in _plan(type(obj)):
        if h.skip:
            continue
        value = getattr(obj, f.name)
        if not (h.omit_none and value is None):
            out[h.key or f.name] = h.encode(value) if h.encode is not None else encode(value)
        for name in h.followed_by:
            out[name] = encode(getattr(obj, name))
    for key, value in overrides.items():
        out[key] = encode(value)
    return out


def known_keys(cls: type) -> tuple[str, ...]:
    """The keys `from_dict(cls, ...)` accepts, in the order `to_dict` writes them."""
    keys: list[str] = []
    for f, h in _plan(cls):
        if not h.skip:
            keys.append(h.key or f.name)
        keys.extend(h.followed_by)
    return tuple(keys)


def from_dict(cls: type[T], data: Any, *, what: str | None = None) -> T:
    """Rebuild a `cls` from its dict form `data` (module docstring). `what` names the thing in errors
    ("shape": "unknown shape field(s) x; known: ..."); default the class name."""
    what = what or cls.__name__
    if not isinstance(data, Mapping):
        raise UserError(f"{what} must be a mapping of its fields, got {type(data).__name__}")
    known = known_keys(cls)
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise UserError(f"unknown {what} field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    missing: list[str] = []
    for f, h in _plan(cls):
        key = h.key or f.name
        if not f.init or h.skip:
            continue
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                missing.append(key)
            continue
        raw = data[key]
        values[f.name] = h.decode(raw) if h.decode is not None else decode(hints.get(f.name, Any), raw)
    if missing:
        raise UserError(f"incomplete {what}: missing field(s) {', '.join(missing)}")
    return cls(**values)


def decode(hint: Any, value: Any) -> Any:
    """`value` (a dict form) as the type `hint` says: dataclasses rebuilt, sequences as tuples where the
    hint is a tuple, optional values, dict values and enums; anything the hint does not shape, as it is."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        return decode(options[0], value) if len(options) == 1 else value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        reader = getattr(hint, "from_dict", None)
        return reader(value) if reader is not None else from_dict(hint, value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise UserError(f"expected a list, got {type(value).__name__} {value!r}")
        if origin is list:
            return [decode(args[0] if args else Any, v) for v in value]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in value)
        if args and len(args) != len(value):
            raise UserError(f"expected a list of {len(args)} values, got {len(value)}: {value!r}")
        return tuple(decode(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin in (dict, Mapping) and args and isinstance(value, Mapping):
        return {_key(args[0], k): decode(args[1], v) for k, v in value.items()}
    return value


def _key(hint: Any, key: Any) -> Any:
    """A dict key read back: JSON keys are strings, so a key hinted as a number or an enum is converted."""
    if isinstance(key, str) and hint in (int, float):
        try:
            return hint(key)
        except ValueError:
            raise UserError(f"key {key!r} is not a number") from None
    return decode(hint, key)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The fields' evaluated type hints; a hint that cannot be evaluated (a name imported only for type
    checking) is left out, and its field's value is passed through as it is."""
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):
        pass
    namespace = vars(sys.modules[cls.__module__])
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        try:
            out[f.name] = eval(f.type, namespace) if isinstance(f.type, str) else f.type  # noqa: S307
        except Exception:  # noqa: BLE001 - an unresolvable hint only turns conversion off for that field
            continue
    return out


class Serializable:
    """Mixin for a frozen dataclass: `to_dict()` and `from_dict(data)` of its generic dict form."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: Any) -> T:
        return from_dict(cls, data)


__all__ = ["Hook", "METADATA_KEY", "Serializable", "decode", "encode", "from_dict", "hook", "known_keys", "to_dict"]
