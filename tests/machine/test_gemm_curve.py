"""The kernel curves a profile stores: every kernel, sorted positive points, work as the roofline counts it."""

from __future__ import annotations

import pytest

from depthwidth.machine.gemm_curve import (
    ATTENTION_HEAD_DIMS,
    ATTENTION_SIZES,
    ATTENTION_WIDTH,
    GEMV_SIZES,
    MATMUL_SIZES,
    attention_flops,
    measure_curves,
)
from depthwidth.shapes.flops import layer_ops
from depthwidth.shapes.latency import _inventory
from depthwidth.shapes.shape import Shape
from depthwidth.shapes.small_ops import check_curves


def test_attention_work_is_what_the_inventory_counts() -> None:
    shape = Shape(n_layers=1, d_model=128, n_heads=8, vocab_size=64, max_seq_len=512)
    for tokens, past in ATTENTION_SIZES:
        ops = _inventory(shape, batch=1, new_tokens=tokens, past_tokens=past, attn_impl="fused", logits="all")
        fused = next(op for op in ops if op.name == "attention")
        assert attention_flops(tokens, past, heads=8, head_dim=16) == pytest.approx(fused.flops)
        # every head size is timed at heads x head size = 128, so all share the work points
        assert all(attention_flops(tokens, past, heads=ATTENTION_WIDTH // hd, head_dim=hd) == pytest.approx(fused.flops)
                   for hd in ATTENTION_HEAD_DIMS)
    qkv = next(op for op in layer_ops(shape, batch=1, new_tokens=64) if op.name == "mlp_up")
    assert qkv.flops == 2.0 * 64 * 128 * 512 and (64, 128, 512) in MATMUL_SIZES  # a measured size


def test_measured_curves_cover_every_kernel_in_a_fraction_of_a_second() -> None:
    import time

    start = time.perf_counter()
    curves = check_curves(measure_curves(dtypes=("fp32",), cap_s=0.001, repeat=3))
    assert time.perf_counter() - start < 5
    assert set(curves) == {"matmul:fp32", "gemv:fp32", "gelu:fp32", "norm:fp32",
                           *(f"attention@{hd}:fp32" for hd in (8, 16, 32, 64, 128))}
    assert [w for w, _ in curves["gemv:fp32"]] == [2.0 * k * n for _, k, n in GEMV_SIZES]
    works = {key: [w for w, _ in curve] for key, curve in curves.items() if key.startswith("attention@")}
    assert len({tuple(w) for w in works.values()}) == 1  # the same FLOPs at each point
    matmul = curves["matmul:fp32"]
    assert [w for w, _ in matmul] == sorted(2.0 * m * k * n for m, k, n in MATMUL_SIZES)
    assert matmul[-1][1] > matmul[0][1]  # a 512^3 GEMM takes longer than a (64 x 16) @ (16 x 64) one
    assert all(s >= 0 for curve in curves.values() for _, s in curve)
