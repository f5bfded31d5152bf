"""PyTorch modules built from a `Shape`.

Names are imported on first use (PEP 562), so importing one submodule, such as the
configuration, does not import the whole package (torch included)."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "KVCache": "depthwidth.model.cache",
    "Transformer": "depthwidth.model.transformer",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_EXPORTS)
