"""The parts of the machine's measurement that need our own model: the fixed cost per op of an eager
Transformer, per inventory op and per dispatched aten op, the kernel curves added to a profile, and
how much slower those kernels run inside a real forward than back to back (`in_forward_points`).

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

from depthwidth.machine import HardwareProfile, device_kind, profile_to_hardware
from depthwidth.shapes.small_ops import curve_key

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


#: (n_layers, d_model, n_heads, prompt tokens) of the reference forwards `in_forward_points` times:
#: head sizes 8 and 16, kernel calls from ~5 us to ~100 us, none of them a shape of the demo or of the
#: serving family (`benchmarks/bench_latency.py`, `benchmarks/bench_serving.py`)
IN_FORWARD_SHAPES = ((6, 32, 4, 64), (2, 48, 6, 64), (4, 128, 8, 64), (1, 192, 24, 64), (2, 256, 16, 128),
                     (1, 384, 24, 128))
#: dtypes whose factor is measured (when the profile has their curves: not emulated)
IN_FORWARD_DTYPES = ("fp32", "bf16", "fp16")


def in_forward_points(hardware, *, device: str = "cpu", dtype: str = "fp32", rounds: int = 3,
                      calls: int = 5) -> list[tuple[float, float]]:
    """How much slower the curve-priced kernels (matmul, attention, GELU, LayerNorm) run inside our
    eager forward than `hardware`'s curves say, against the size of a kernel call: for each
    `IN_FORWARD_SHAPES` model (random weights, inference mode), a batch-1 prefill into an empty KV
    cache timed in `rounds` interleaved rounds of `calls` calls (the median of the round medians),
    less the call's predicted dispatch cost (its counted aten ops x `hardware.dispatch_overhead_s`)
    and the roofline of the ops without a curve, over the curves' seconds; one point (mean curve
    seconds per kernel call, factor) per shape. Measured on a 2-core Xeon at 2 threads: about 2.0
    for calls of ~5 us falling to 1.2-1.3 at ~100 us (kernels timed back to back find their data in
    the caches of the cores that wrote it and the OpenMP team awake, which a forward of many small
    ops does not); at 1 thread 1.1-1.6 with no clear trend."""
    import torch

    from depthwidth.bench.dispatch import count_dispatched
    from depthwidth.model.generate import new_cache
    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.latency import _inventory, predict_prefill
    from depthwidth.shapes.shape import Shape
    from depthwidth.shapes.small_ops import op_kernel

    sync = torch.cuda.synchronize if device_kind(device) == "cuda" else None
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    gen = torch.Generator(device=device).manual_seed(0)
    calls_of, kernel_s, rest_s, n_calls = [], [], [], []
    with torch.inference_mode():
        for n_layers, d_model, n_heads, tokens in IN_FORWARD_SHAPES:
            shape = Shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab_size=256, max_seq_len=tokens)
            model = Transformer(shape).to(device=device, dtype=torch_dtype).eval()
            cache = new_cache(model, batch_size=1, max_len=tokens)
            idx = torch.randint(0, 256, (1, tokens), generator=gen, device=device)  # (1, T)

            def call(model=model, cache=cache, idx=idx) -> None:
                cache.length = 0
                model(idx, cache=cache)
            ops = count_dispatched(call)
            p = predict_prefill(shape, hardware=hardware, batch=1, prompt_len=tokens, dtype=dtype,
                                attn_impl="sdpa", logits="all", dispatched_ops=ops)
            kernels = sum(s for name, s in p.by_op.items() if op_kernel(name, ffn=shape.ffn, norm=shape.norm))
            inventory = _inventory(shape, batch=1, new_tokens=tokens, past_tokens=0, attn_impl="fused", logits="all")
            calls_of.append(call)
            kernel_s.append(kernels)
            rest_s.append(p.total_s - kernels)
            n_calls.append(sum(op.repeat for op in inventory if op_kernel(op.name, ffn=shape.ffn, norm=shape.norm)))
        medians: list[list[float]] = [[] for _ in calls_of]
        for _ in range(rounds):
            for i, call in enumerate(calls_of):
                medians[i].append(_median_seconds(call, repeat=calls, sync=sync))
    return [(k / n, min(50.0, max(0.1, (statistics.median(m) - rest) / k)))
            for m, k, rest, n in zip(medians, kernel_s, rest_s, n_calls, strict=True)]


def has_small_op_costs(profile: HardwareProfile) -> bool:
    """Whether `profile` has every small-op cost this version measures (a profile without attention
    curves per head size, a one-row GEMM curve or the in-forward factor is measured again)."""
    return (any(key.startswith("attention@") for key in profile.op_curves)
            and any(key.startswith("gemv:") for key in profile.op_curves) and DISPATCH_OP in profile.op_overheads
            and bool(profile.kernel_in_forward))


def add_small_op_costs(profile: HardwareProfile, *, device: str | None = None, quick: bool = False,
                       rounds: int | None = None) -> tuple[HardwareProfile, float]:
    """`profile` with the kernel curves of its dtypes, the per-dispatched-op cost and the in-forward
    factor of each dtype measured now on `device` (default: the profile's), at the torch threads in
    effect; and the seconds that took. All three are measured in `rounds` rounds (default 3, quick
    1) and each round's factor against that round's curves and dispatch cost, so that a machine
    whose speed drifts by tens of percent within seconds (seen on shared 2-core VMs) gives the
    factor of one state of the machine; stored: the median of the rounds, point by point."""
    from depthwidth.machine.gemm_curve import measure_curves

    device = device or profile.device
    rounds = rounds or (1 if quick else 3)
    start = time.perf_counter()
    dtypes = tuple(d for d in profile.peak_flops if d not in profile_emulated(profile))
    measured: list[tuple[dict, float, dict[str, list[tuple[float, float]]]]] = []
    for _ in range(rounds):
        curves = measure_curves(dtypes=dtypes, device=device, cap_s=0.005 if quick else 0.02)
        dispatch = dispatch_costs(device=device, repeat=3 if quick else 7)[DISPATCH_OP]
        spec = profile_to_hardware(replace(profile, op_curves=curves, kernel_in_forward={},
                                           op_overheads={**profile.op_overheads, DISPATCH_OP: dispatch}))
        factors = {dtype: in_forward_points(spec, device=device, dtype=dtype)
                   for dtype in IN_FORWARD_DTYPES if curve_key("matmul", dtype) in curves}
        measured.append((curves, dispatch, factors))
    curves = {key: [[w, statistics.median(m[0][key][i][1] for m in measured)] for i, (w, _) in enumerate(points)]
              for key, points in measured[0][0].items()}
    factors = {dtype: [[statistics.median(m[2][dtype][i][j] for m in measured) for j in (0, 1)]
                       for i in range(len(IN_FORWARD_SHAPES))] for dtype in measured[0][2]}
    updated = replace(profile, op_curves=curves, kernel_in_forward=factors,
                      op_overheads={**profile.op_overheads, DISPATCH_OP: statistics.median(m[1] for m in measured)})
    return updated, time.perf_counter() - start


def profile_emulated(profile: HardwareProfile) -> tuple[str, ...]:
    """The dtypes the profile records as emulated (none in a profile of an earlier version)."""
    return tuple(getattr(profile, "emulated", {}) or ())


__all__ = ["DISPATCH_OP", "IN_FORWARD_SHAPES", "add_small_op_costs", "dispatch_costs", "eager_block_overhead",
           "has_small_op_costs", "in_forward_points"]
