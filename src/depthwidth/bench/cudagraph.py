"""Decode with CUDA graphs: one decode step captured once and replayed, so the step pays one graph
launch instead of one kernel launch per op (the launch overhead that makes an eager small model
launch-bound on a GPU).

The KV cache is static (`model.cache.KVCache` preallocates every layer's keys and values) and the
step's position is a Python int, so a capture at `context` cached tokens records exactly the kernels
of the step after `context` tokens: writing position `context` and attending over `context + 1`
keys. Replaying it is what the bench times (it rewinds the cache to `context` before every eager
call too). A serving loop that moves on through positions would capture one graph per position or
index the cache with a device tensor; the bench needs one position per point. CUDA only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from depthwidth.model.cache import KVCache

WARMUP_CALLS = 3


def capture_decode(model: nn.Module, step: torch.Tensor, cache: KVCache, *, context: int) -> Callable[[], object]:
    """A callable that replays one captured decode step of `step` (B, 1) after `context` cached tokens
    (warm-up calls on a side stream first, as torch.cuda.graph requires); the cache length is put
    back to `context` after the capture."""
    if step.device.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA model and input, got {step.device}")
    side = torch.cuda.Stream(device=step.device)
    side.wait_stream(torch.cuda.current_stream(step.device))
    with torch.inference_mode(), torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            cache.length = context
            model(step, cache=cache)
    torch.cuda.current_stream(step.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    cache.length = context
    with torch.inference_mode(), torch.cuda.graph(graph):
        model(step, cache=cache)
    cache.length = context
    torch.cuda.synchronize(step.device)
    return graph.replay


__all__ = ["capture_decode"]
