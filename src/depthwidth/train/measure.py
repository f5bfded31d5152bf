"""Memory measurements around a training run: bytes saved for backward, bytes of model and optimizer
states, peak resident memory. (The MFU denominator, the machine's peak FLOP/s, is
`depthwidth.machine.peak_flops`.)"""

from __future__ import annotations

import resource
import sys
from contextlib import contextmanager

import torch


class SavedTensorMeter:
    """Counts the distinct storages saved for backward inside `track()` (parameters excluded,
    since they are states, not activations). `peak_bytes` is their total: all of them are alive
    together when the forward pass ends."""

    def __init__(self, params) -> None:
        self._param_ptrs = {_local(p).untyped_storage().data_ptr() for p in params}
        self._seen: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = _local(tensor).untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self._param_ptrs and tensor.device.type != "meta":
            self._seen[ptr] = max(self._seen.get(ptr, 0), storage.nbytes())
        return tensor

    @contextmanager
    def track(self):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
            yield self

    @property
    def peak_bytes(self) -> int:
        return sum(self._seen.values())


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's own shard (FSDP2, tensor parallel), else the tensor."""
    return getattr(tensor, "_local_tensor", tensor)


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and optimizer states, counted from the tensors themselves."""
    total = 0
    for p in model.parameters():
        total += p.numel() * p.element_size()
        if p.grad is not None:
            total += p.grad.numel() * p.grad.element_size()
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                total += value.numel() * value.element_size()
    return total


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (ru_maxrss is KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


__all__ = ["SavedTensorMeter", "peak_rss_bytes", "state_bytes"]
