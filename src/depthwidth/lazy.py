"""Lazy package exports (PEP 562): a package names what it re-exports and from which submodule, and
each name is imported on first use. So importing one light submodule (a configuration, a list of
allowed values) does not import the whole package and torch with it. An exported name must differ
from every submodule's name: once a submodule is imported, its name on the package is the module."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """The package's `__getattr__`: `exports` maps a name to the module that defines it."""

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


__all__ = ["lazy_exports"]
