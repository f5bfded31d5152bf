"""The built-in demo study: `demo.toml`, shipped inside the package (and linked as examples/demo.toml)."""

from __future__ import annotations

import importlib.resources

from depthwidth.study.spec import StudySpec, parse_spec

DEMO_RESOURCE = "demo.toml"


def demo_spec_text() -> str:
    return importlib.resources.files("depthwidth.study").joinpath(DEMO_RESOURCE).read_text(encoding="utf-8")


def demo_spec() -> StudySpec:
    return parse_spec(demo_spec_text(), source="depthwidth/study/demo.toml")


__all__ = ["demo_spec", "demo_spec_text"]
