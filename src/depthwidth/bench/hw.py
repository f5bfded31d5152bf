"""The parts of the machine's measurement that need our own model: the fixed cost per op of an eager
Transformer, per inventory op and per dispatched aten op, and the kernel curves added to a profile.

`depthwidth.machine.measure_profile(block_overhead=eager_block_overhead)` records the cost per
inventory op as the profile's `op_overhead_s` (the machine layer cannot import the model);
`add_small_op_costs` adds the cost per dispatched op (`op_overheads["dispatch_op"]`) and the kernel
curves of `depthwidth.machine.gemm_curve` (`op_curves`), which `depthwidth.shapes.small_ops` prices
small ops with.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

from depthwidth.machine import HardwareProfile, device_kind

#: key in `HardwareProfile.op_overheads` of the fixed seconds per dispatched aten op
DISPATCH_OP = "dispatch_op"
_CALLS = 20


def _tiny(n_layers: int, device: str):
    import torch

    from depthwidth.model.generate import new_cache
    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.shape import Shape

    shape = Shape(n_layers=n_layers, d_model=8, n_heads=1, vocab_size=8, max_seq_len=16)
    model = Transformer(shape).to(device).eval()
    cache = new_cache(model, batch_size=1, max_len=9)
    with torch.inference_mode():
        model(torch.zeros(1, 8, dtype=torch.long, device=device), cache=cache)  # 8 cached tokens
    step = torch.zeros(1, 1, dtype=torch.long, device=device)  # (B=1, T=1)

    def decode() -> None:
        cache.length = 8
        model(step, cache=cache)
    return shape, decode


def _median_seconds(fn, *, repeat: int, sync) -> float:
    """Median seconds of `repeat` timed calls after one warm-up (the serving bench reports medians)."""
    fn()
    samples = []
    for _ in range(max(3, repeat)):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def dispatch_costs(*, device: str = "cpu", repeat: int = 7) -> dict[str, float]:
    """Fixed seconds of our eager model's ops (medians of `repeat` loops), timed on a 1-token decode step with a KV cache of a
    Transformer of width 8 (FLOPs and bytes negligible) at 1 and 9 layers: the time per added layer
    divided by the aten ops it dispatches (`DISPATCH_OP`, counted with `bench.dispatch`) and by the
    ops `layer_ops` counts per layer (`machine.EAGER_BLOCK_OP`: an eager layer dispatches about three
    aten ops per inventory op)."""
    import torch

    from depthwidth.bench.dispatch import count_dispatched
    from depthwidth.machine import EAGER_BLOCK_OP
    from depthwidth.shapes.flops import layer_ops

    sync = torch.cuda.synchronize if device_kind(device) == "cuda" else None
    times, counts = {}, {}
    with torch.inference_mode():
        for n_layers in (1, 9):
            shape, decode = _tiny(n_layers, device)
            counts[n_layers] = count_dispatched(decode)

            def loop(decode=decode) -> None:
                for _ in range(_CALLS):
                    decode()
            times[n_layers] = _median_seconds(loop, repeat=repeat, sync=sync) / _CALLS
    per_layer = max(0.0, (times[9] - times[1]) / 8)
    inventory = sum(1 for op in layer_ops(shape, batch=1, new_tokens=1) if op.repeat == shape.n_layers)
    return {EAGER_BLOCK_OP: per_layer / inventory, DISPATCH_OP: per_layer * 8 / (counts[9] - counts[1])}


def eager_block_overhead(*, device: str = "cpu", repeat: int = 7) -> float:
    """Fixed seconds per inventory op of our own eager model (`dispatch_costs`), what a prediction
    without a dispatched-op count charges per op."""
    from depthwidth.machine import EAGER_BLOCK_OP

    return dispatch_costs(device=device, repeat=repeat)[EAGER_BLOCK_OP]


def has_small_op_costs(profile: HardwareProfile) -> bool:
    return bool(profile.op_curves) and DISPATCH_OP in profile.op_overheads


def add_small_op_costs(profile: HardwareProfile, *, device: str | None = None,
                       quick: bool = False) -> tuple[HardwareProfile, float]:
    """`profile` with the kernel curves of its dtypes and the per-dispatched-op cost measured now on
    `device` (default: the profile's), at the torch threads in effect; and the seconds that took."""
    from depthwidth.machine.gemm_curve import measure_curves

    device = device or profile.device
    start = time.perf_counter()
    curves = measure_curves(dtypes=tuple(d for d in profile.peak_flops if d not in profile_emulated(profile)),
                            device=device, cap_s=0.005 if quick else 0.02)
    costs = dispatch_costs(device=device, repeat=3 if quick else 7)
    spent = time.perf_counter() - start
    updated = replace(profile, op_curves=curves, op_overheads={**profile.op_overheads, DISPATCH_OP: costs[DISPATCH_OP]})
    return updated, spent


def profile_emulated(profile: HardwareProfile) -> tuple[str, ...]:
    """The dtypes the profile records as emulated (none in a profile of an earlier version)."""
    return tuple(getattr(profile, "emulated", {}) or ())


__all__ = ["DISPATCH_OP", "add_small_op_costs", "dispatch_costs", "eager_block_overhead", "has_small_op_costs"]
