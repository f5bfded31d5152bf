"""How many aten ops one eager call dispatches: a `TorchDispatchMode` counter around the call (after
autograd, under inference mode exactly what the CPU or the GPU is asked to run: matmuls, views,
splits, cache writes, residual adds, a dropout that returns its input). The roofline's fixed cost of
an eager call is this count times the measured cost of one dispatched op
(`depthwidth.shapes.small_ops`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class DispatchCounter(TorchDispatchMode):
    """Counts the aten ops dispatched inside `with DispatchCounter() as c:` (by op name in `c.ops`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def count_dispatched(fn: Callable[[], Any]) -> int:
    """Aten ops one call of `fn` dispatches (it runs once, untimed)."""
    with DispatchCounter() as counter:
        fn()
    return counter.total


__all__ = ["DispatchCounter", "count_dispatched"]
