"""PyTorch modules built from a `Shape`."""

from depthwidth.model.cache import KVCache
from depthwidth.model.transformer import Transformer

__all__ = ["KVCache", "Transformer"]
