"""PyTorch modules built from a `Shape`.

Names are imported on first use (`depthwidth.lazy`), so importing one submodule, such as the
configuration, does not import the whole package (torch included)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "KVCache": "depthwidth.model.cache",
    "Transformer": "depthwidth.model.transformer",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
