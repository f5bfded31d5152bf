"""Kernel time against size on this device: the curves `depthwidth.shapes.small_ops` prices small ops
with (the roofline's one n=2048 peak is several times optimistic for the GEMMs of a small model).

For each dtype and kernel, a few sizes from tiny to the size where the rate stops growing:
- "matmul": `F.linear` of (m x k) by (k x n) with the shapes of a Transformer's linears, (64 x d) @
  (d x 4d) for d = 16..256 and (512 x 512 x 512); work = 2mkn FLOPs.
- "gemv": the same `F.linear` with one row, (1 x d) @ (d x 4d) for d = 16..512: what a batch-1
  decode step's linears run (on a CPU a different kernel path from 64 rows; bf16 most of all).
- "attention@<head size>": `F.scaled_dot_product_attention` at head sizes 8 to 128 with heads x head
  size = 128 (16 heads of 8 ... 1 head of 128, so every head size has the same FLOPs at each point),
  causal prefill of 16, 64 and 256 tokens and one decode token over 64 and 256 keys; work = the FLOPs
  `shapes.flops.layer_ops` counts for it (scores and values, causal keys per query). A CPU's fused
  attention costs about the same per head and score up to head size 16, so one head size cannot price
  the others by FLOPs (`shapes.small_ops.attention_curve`).
- "gelu": tanh GELU of 1k to 512k elements; "norm": LayerNorm of (64 x d) rows; work = elements.
Each point is the median of the calls made in `cap_s` seconds (at least 3), minus
the kernel's own fixed call cost: its time at the smallest size (1 token, 8 wide), which the
per-op dispatch cost already prices. torch is imported inside the functions.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from depthwidth.machine.device import device_kind
from depthwidth.shapes.small_ops import curve_key

MATMUL_SIZES = ((64, 16, 64), (64, 32, 128), (64, 64, 256), (64, 128, 512), (64, 256, 1024), (512, 512, 512))
#: one-row products (a batch-1 decode step's linears): (1 x d) @ (d x 4d)
GEMV_SIZES = ((1, 16, 64), (1, 64, 256), (1, 128, 512), (1, 256, 1024), (1, 512, 2048))
#: (tokens, cached keys before them): prefill of T tokens is (T, 0), one decode step (1, S)
ATTENTION_SIZES = ((16, 0), (64, 0), (256, 0), (1, 64), (1, 256))
#: head sizes with an attention curve; heads x head size is ATTENTION_WIDTH at each
ATTENTION_HEAD_DIMS = (8, 16, 32, 64, 128)
ATTENTION_WIDTH = 128
GELU_SIZES = (1024, 8192, 65536, 524288)
NORM_WIDTHS = (64, 256, 1024)


def _best(fn: Callable[[], Any], *, sync: Callable[[], Any] | None, repeat: int, cap_s: float) -> float:
    """Median seconds of one call after two warm-ups: calls go on until `cap_s` is spent and at least
    `repeat` are done, but stop after 3 once `cap_s` is spent (a large GEMM is timed 3 times, a tiny
    kernel thousands). The median, not the best: a model's forward runs each kernel once, among
    others, and the serving bench reports medians."""
    fn()
    fn()
    if sync:
        sync()
    samples: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        samples.append(time.perf_counter() - t0)
        if time.perf_counter() - start > cap_s and (len(samples) >= repeat or len(samples) >= 3):
            return statistics.median(samples)


def attention_flops(tokens: int, past: int, *, heads: int, head_dim: int) -> float:
    """FLOPs of scores and values for one sequence, as `shapes.flops.layer_ops` counts them."""
    from depthwidth.shapes.flops import keys_per_query

    keys = keys_per_query(new_tokens=tokens, past_tokens=past, attention="causal")
    return 2 * 2.0 * tokens * keys * heads * head_dim


def measure_curves(*, dtypes: tuple[str, ...] = ("fp32",), device: str = "cpu", repeat: int = 10,
                   cap_s: float = 0.02) -> dict[str, list[list[float]]]:
    """{"kernel:dtype": [[work, seconds above the call cost], ...]} for every kernel and dtype (module
    docstring). About a second per dtype on a 2-core CPU."""
    import torch
    import torch.nn.functional as F

    sync = torch.cuda.synchronize if device_kind(device) == "cuda" else None
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    gen = torch.Generator(device=device).manual_seed(0)
    out: dict[str, list[list[float]]] = {}
    for dtype in dtypes:
        if dtype not in torch_dtype:
            continue
        dt = torch_dtype[dtype]

        def rand(*size: int, dt: Any = dt) -> Any:
            return torch.randn(*size, generator=gen, device=device).to(dt)

        def timed(make: Callable[[Any], Callable[[], Any]], sizes: tuple, work: Callable[[Any], float],
                  smallest: Any) -> list[list[float]]:
            base = _best(make(smallest), sync=sync, repeat=repeat, cap_s=cap_s)
            return [[work(size), max(0.0, _best(make(size), sync=sync, repeat=repeat, cap_s=cap_s) - base)]
                    for size in sizes]

        def linear(size):
            m, k, n = size
            a, w = rand(m, k), rand(n, k)
            return lambda: F.linear(a, w)

        def attention(size, head_dim):
            tokens, past = size
            heads = ATTENTION_WIDTH // head_dim
            q = rand(1, heads, tokens, head_dim)
            kv = rand(1, heads, tokens + past, head_dim)
            return lambda: F.scaled_dot_product_attention(q, kv, kv, is_causal=past == 0 and tokens > 1)

        def gelu(n):
            x = rand(n)
            return lambda: F.gelu(x, approximate="tanh")

        def norm(width):
            x = rand(64, width) if width > 8 else rand(1, width)
            return lambda: F.layer_norm(x, (width,))

        old_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            with torch.inference_mode():
                out[curve_key("matmul", dtype)] = timed(linear, MATMUL_SIZES, lambda s: 2.0 * s[0] * s[1] * s[2],
                                                        (1, 8, 8))
                out[curve_key("gemv", dtype)] = timed(linear, GEMV_SIZES, lambda s: 2.0 * s[1] * s[2], (1, 8, 8))
                for hd in ATTENTION_HEAD_DIMS:
                    out[curve_key("attention", dtype, head_dim=hd)] = timed(
                        lambda size, hd=hd: attention(size, hd), ATTENTION_SIZES, lambda s, hd=hd: attention_flops(
                            s[0], s[1], heads=ATTENTION_WIDTH // hd, head_dim=hd), (1, 0))
                out[curve_key("gelu", dtype)] = timed(gelu, GELU_SIZES, float, 8)
                out[curve_key("norm", dtype)] = timed(norm, NORM_WIDTHS, lambda w: 64.0 * w, 8)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return out


__all__ = ["ATTENTION_HEAD_DIMS", "GEMV_SIZES", "ATTENTION_SIZES", "ATTENTION_WIDTH", "GELU_SIZES", "MATMUL_SIZES", "NORM_WIDTHS", "attention_flops", "measure_curves"]
