"""Key/value cache for incremental decoding, preallocated per layer (GQA-aware: it stores
n_kv_heads heads, not n_heads)."""

from __future__ import annotations

import torch

from depthwidth.shapes.shape import Shape


class KVCache:
    """Keys and values of every layer for a batch, shape (B, n_kv_heads, max_len, head_dim) each."""

    def __init__(
        self,
        shape: Shape,
        *,
        batch_size: int,
        max_len: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        max_len = shape.max_seq_len if max_len is None else max_len
        if max_len > shape.max_seq_len:
            raise ValueError(f"max_len={max_len} exceeds max_seq_len={shape.max_seq_len} of this shape")
        size = (batch_size, shape.n_kv_heads, max_len, shape.head_dim)
        self.keys = [torch.zeros(size, dtype=dtype, device=device) for _ in range(shape.n_layers)]
        self.values = [torch.zeros(size, dtype=dtype, device=device) for _ in range(shape.n_layers)]
        self.max_len = max_len
        self.length = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write this step's k, v (B, Hk, T, Dh) after the cached ones; return all (B, Hk, length+T, Dh)."""
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache full: {end} tokens exceed its max_len={self.max_len}")
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n: int) -> None:
        self.length += n

    def used_bytes(self) -> int:
        """Bytes the cached tokens occupy (keys and values of every layer)."""
        per_token = sum(t[:, :, :1].numel() * t.element_size() for t in self.keys + self.values)
        return per_token * self.length

    def allocated_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)
