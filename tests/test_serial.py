"""The generic dict form (`depthwidth.serial`): field order, nesting, hooks, round trips, refusals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Mapping

import pytest

from depthwidth.errors import UserError
from depthwidth.serial import Serializable, from_dict, hook, known_keys, to_dict


class Color(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, kw_only=True, slots=True)
class Point(Serializable):
    x: float
    y: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Custom:
    """A nested record that shapes its own dict by hand."""

    a: int

    def to_dict(self) -> dict:
        return {"A": self.a}

    @classmethod
    def from_dict(cls, data: dict) -> Custom:
        return cls(a=data["A"])


@dataclass(frozen=True, kw_only=True, slots=True)
class Path3(Serializable):
    name: str
    points: tuple[Point, ...]
    pair: tuple[int, str]
    start: Point | None
    color: Color
    weights: Mapping[str, float]
    custom: Custom
    tags: tuple[str, ...] = ()
    by_lr: dict[float, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Hooked(Serializable):
    timing: Point = field(metadata=hook(key="seconds", followed_by=("double",)))
    note: str | None = field(default=None, metadata=hook(omit_none=True))
    cache: str = field(default="scratch", metadata=hook(skip=True))
    lrs: dict[float, int] = field(default_factory=dict, metadata=hook(
        encode=lambda d: {repr(k): v for k, v in d.items()}, decode=lambda d: {float(k): v for k, v in d.items()}))

    @property
    def double(self) -> float:
        return 2 * self.timing.x


def _path() -> Path3:
    return Path3(name="p", points=(Point(x=1.0, y=2.0), Point(x=3.5)), pair=(7, "seven"), start=Point(x=-1.0),
                 color=Color.BLUE, weights=MappingProxyType({"a": 0.5, "b": 1.5}), custom=Custom(a=4),
                 tags=("t1", "t2"), by_lr={0.001: (1, 2), 0.01: ()})


def test_fields_in_declaration_order_with_values_made_plain():
    d = to_dict(_path())
    assert list(d) == ["name", "points", "pair", "start", "color", "weights", "custom", "tags", "by_lr"]
    assert d == {
        "name": "p", "points": [{"x": 1.0, "y": 2.0}, {"x": 3.5, "y": 0.0}], "pair": [7, "seven"],
        "start": {"x": -1.0, "y": 0.0}, "color": "blue", "weights": {"a": 0.5, "b": 1.5}, "custom": {"A": 4},
        "tags": ["t1", "t2"], "by_lr": {0.001: [1, 2], 0.01: []},
    }
    assert type(d["weights"]) is dict and type(d["pair"]) is list
    assert _path().to_dict() == d  # the mixin's method is the function


def test_round_trip_through_json_restores_nested_records_tuples_enums_and_number_keys():
    original = _path()
    back = Path3.from_dict(json.loads(json.dumps(original.to_dict())))
    assert back == original
    assert back.points[1] == Point(x=3.5, y=0.0) and isinstance(back.points, tuple)
    assert back.pair == (7, "seven") and back.color is Color.BLUE and back.custom == Custom(a=4)
    assert back.by_lr == {0.001: (1, 2), 0.01: ()}


def test_none_and_defaults():
    p = Path3(name="q", points=(), pair=(1, "a"), start=None, color=Color.RED, weights={}, custom=Custom(a=0))
    d = p.to_dict()
    assert d["start"] is None and d["tags"] == [] and d["by_lr"] == {}
    assert from_dict(Path3, d) == p
    minimal = {k: v for k, v in d.items() if k not in ("tags", "by_lr")}
    assert from_dict(Path3, minimal) == p  # fields with defaults may be absent


def test_hooks_rename_skip_omit_encode_and_computed_keys():
    h = Hooked(timing=Point(x=1.5, y=2.0), lrs={0.003: 2, 0.01: 1})
    d = h.to_dict()
    assert d == {"seconds": {"x": 1.5, "y": 2.0}, "double": 3.0, "lrs": {"0.003": 2, "0.01": 1}}
    assert list(d) == ["seconds", "double", "lrs"]  # note omitted (None), cache skipped
    assert Hooked.from_dict(d) == h  # the computed key is accepted and ignored
    with_note = Hooked(timing=Point(x=0.0), note="hello", cache="other")
    d = with_note.to_dict()
    assert list(d) == ["seconds", "double", "note", "lrs"] and d["note"] == "hello"
    back = Hooked.from_dict(d)
    assert back.note == "hello" and back.cache == "scratch"  # a skipped field is read back as its default
    assert known_keys(Hooked) == ("seconds", "double", "note", "lrs")


def test_overrides_replace_in_place_or_append():
    d = to_dict(Point(x=1.0, y=2.0), x=(9, 9), z="new")
    assert d == {"x": [9, 9], "y": 2.0, "z": "new"} and list(d) == ["x", "y", "z"]


def test_unknown_keys_are_refused_naming_them_and_the_known_keys():
    with pytest.raises(UserError, match=r"^unknown Point field\(s\) w, z; known: x, y$"):
        Point.from_dict({"x": 1.0, "z": 2, "w": 3})
    with pytest.raises(UserError, match=r"^unknown shape field\(s\) depth; known: x, y$"):
        from_dict(Point, {"depth": 3, "x": 1.0}, what="shape")
    with pytest.raises(UserError, match=r"unknown Hooked field\(s\) timing; known: double, lrs, note, seconds"):
        Hooked.from_dict({"timing": {"x": 1.0}})  # the field's name is not its key


def test_missing_fields_and_wrong_kinds_are_refused():
    with pytest.raises(UserError, match=r"^incomplete Point: missing field\(s\) x$"):
        Point.from_dict({"y": 1.0})
    with pytest.raises(UserError, match="Point must be a mapping of its fields, got list"):
        Point.from_dict([1.0, 2.0])
    d = _path().to_dict()
    with pytest.raises(UserError, match="expected a list"):
        Path3.from_dict(d | {"points": "abc"})
    with pytest.raises(UserError, match="expected a list of 2 values, got 3"):
        Path3.from_dict(d | {"pair": [1, "a", "b"]})
    with pytest.raises(UserError, match=r"unknown Point field\(s\) q"):  # nested records refuse too
        Path3.from_dict(d | {"start": {"x": 1.0, "q": 1}})


def test_a_non_dataclass_is_refused():
    with pytest.raises(TypeError, match="is not a dataclass"):
        to_dict({"a": 1})
