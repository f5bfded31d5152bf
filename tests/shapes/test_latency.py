"""Roofline latency: hand-computed cases on a synthetic device, published formulas for communication and
the pipeline bubble, and monotonic sanity at equal parameters."""

import pytest

from depthwidth.shapes.families import plan_family
from depthwidth.shapes.flops import flops
from depthwidth.shapes.hardware import HARDWARE, HardwareSpec
from depthwidth.shapes.latency import (
    pipeline_bubble_fraction, predict_decode, predict_forward, predict_prefill, predict_train_step,
    ring_allreduce_s,
)
from depthwidth.shapes.memory import kv_cache_bytes_per_token
from depthwidth.shapes.shape import Shape

GPT2 = Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50304)
# A device with round numbers: 1 TFLOP/s, 100 GB/s, no efficiency loss, 10 us per op, 10 GB/s links.
TOY = HardwareSpec(name="toy", label="toy", kind="gpu", peak_flops={"fp32": 1e12, "bf16": 2e12}, mem_bandwidth=1e11,
                   mem_capacity=1e10, link_bandwidth=1e10, link_latency_s=1e-6, flops_efficiency=1.0,
                   bandwidth_efficiency=1.0, link_efficiency=1.0, train_mfu=0.5, op_overhead_s=1e-5, source="test")


def _matmul_weights(s: Shape) -> int:
    mlp = (3 if s.ffn == "swiglu" else 2) * s.d_model * s.d_ff
    per_layer = s.d_model * (s.q_dim + 2 * s.kv_dim) + s.q_dim * s.d_model + mlp
    return s.n_layers * per_layer + s.d_model * s.vocab_size


def test_decode_at_batch_1_reads_every_weight_and_the_kv_cache_once():
    context = 1000
    d = predict_decode(GPT2, hardware=TOY, batch=1, context=context, dtype="bf16")
    weights = (_matmul_weights(GPT2) + (2 * GPT2.n_layers + 1) * GPT2.d_model) * 2  # + norm weights
    kv = kv_cache_bytes_per_token(GPT2, dtype="bf16") * (context + 1)
    assert d.bytes == pytest.approx(weights + kv, rel=0.01)  # activations of one token are < 1%
    assert d.memory_bound_share == 1.0 and d.compute_bound_s == 0.0
    # all memory-bound: roofline time = bytes / bandwidth; plus one fixed cost per op (8 per layer, fused
    # attention, + final norm + head)
    assert d.overhead_s == pytest.approx((8 * 12 + 2) * 1e-5)
    assert d.total_s == pytest.approx(d.bytes / 1e11 + d.overhead_s)
    assert d.tokens == 1 and d.tokens_per_s == pytest.approx(1 / d.total_s)


def test_large_prefill_is_compute_bound_and_matches_flops():
    p = predict_forward(GPT2, hardware=TOY, batch=8, seq_len=1024, dtype="bf16")
    expected_flops = flops(GPT2, seq_len=1024).forward_per_token * 8 * 1024
    assert p.flops == pytest.approx(expected_flops)
    assert p.compute_bound_share > 0.8
    assert p.total_s >= expected_flops / 2e12


def test_eager_attention_counts_three_ops_and_the_score_traffic():
    fused = predict_forward(GPT2, hardware=TOY, batch=1, seq_len=512, attn_impl="fused")
    eager = predict_forward(GPT2, hardware=TOY, batch=1, seq_len=512, attn_impl="eager")
    assert eager.overhead_s - fused.overhead_s == pytest.approx(2 * 12 * 1e-5)
    # the (heads x T x T/2) scores are written and read twice more (softmax in and out, values in)
    scores = 12 * 512 * 256 * 2  # elements per layer, causal average, bf16 bytes
    assert eager.bytes - fused.bytes == pytest.approx(12 * 4 * scores, rel=0.05)
    assert predict_forward(GPT2, hardware=TOY, batch=1, seq_len=512, attn_impl="sdpa").total_s == fused.total_s


def test_prefill_head_only_for_the_last_position():
    all_pos = predict_prefill(GPT2, hardware=TOY, batch=1, prompt_len=256, logits="all")
    last = predict_prefill(GPT2, hardware=TOY, batch=1, prompt_len=256)
    assert all_pos.flops - last.flops == pytest.approx(2 * 768 * 50304 * 255)
    assert last.total_s < all_pos.total_s


def test_ring_allreduce_formula():
    # Patarasuk and Yuan 2009: 2(t-1)/t x bytes / bandwidth, plus 2(t-1) latencies
    h = HARDWARE["h100-sxm"]
    assert ring_allreduce_s(nbytes=1e9, ranks=8, hardware=h) == pytest.approx(14 / 8 * 1e9 / (450e9 * 0.8) + 14e-6)
    assert ring_allreduce_s(nbytes=1e9, ranks=1, hardware=h) == 0.0
    with pytest.raises(ValueError, match="no device-to-device link"):
        ring_allreduce_s(nbytes=1.0, ranks=2, hardware=HARDWARE["cpu"])


def test_tensor_parallel_splits_matmuls_and_adds_two_allreduces_per_layer():
    one = predict_decode(GPT2, hardware=TOY, batch=4, context=128)
    two = predict_decode(GPT2, hardware=TOY, batch=4, context=128, tp=2)
    assert two.flops == pytest.approx(one.flops / 2)  # norms and activations have no FLOPs
    per = ring_allreduce_s(nbytes=4 * 768 * 2, ranks=2, hardware=TOY) + TOY.op_overhead_s
    assert two.comm_s == pytest.approx(2 * 12 * per) and two.by_op["tp_allreduce"] == two.comm_s
    assert two.total_s == pytest.approx(sum(two.by_op.values()))


def test_pipeline_bubble():
    assert pipeline_bubble_fraction(pp=4, micro_batches=12) == pytest.approx(3 / 15)
    assert pipeline_bubble_fraction(pp=1, micro_batches=1) == 0.0
    step = predict_train_step(GPT2, hardware=TOY, seq_len=1024, global_batch=12, pp=4, dtype="bf16")
    assert step.bubble_s / (step.by_op["compute"] + step.bubble_s) == pytest.approx(3 / 15)


def test_train_step_from_flops_and_mfu():
    step = predict_train_step(GPT2, hardware=TOY, seq_len=1024, global_batch=16, micro_batch=4, dtype="bf16")
    tokens = 16 * 1024
    assert step.by_op["compute"] == pytest.approx(tokens * flops(GPT2, seq_len=1024).train_per_token / (2e12 * 0.5))
    assert step.comm_s == 0 and step.bubble_s == 0 and step.total_s == step.by_op["compute"]
    # data parallel: the gradient all-reduce is exposed only beyond the last micro-batch's backward
    dp = predict_train_step(GPT2, hardware=TOY, seq_len=1024, global_batch=16, micro_batch=4, dp=4,
                            dp_overlap=False)
    grads = (GPT2.n_layers * (12 * 768**2 + 2 * 768) + 768 + 50304 * 768 + 1024 * 768) * 4  # fp32, no biases
    assert dp.by_op["dp_allreduce_exposed"] == pytest.approx(ring_allreduce_s(nbytes=grads, ranks=4, hardware=TOY))
    hidden = predict_train_step(GPT2, hardware=TOY, seq_len=1024, global_batch=16, micro_batch=4, dp=4)
    assert hidden.by_op["dp_allreduce_exposed"] < dp.by_op["dp_allreduce_exposed"]
    with pytest.raises(ValueError, match="global_batch"):
        predict_train_step(GPT2, hardware=TOY, seq_len=1024, global_batch=10, micro_batch=4)


@pytest.mark.parametrize("hardware", ["h100-sxm", "cpu", "l4"])
def test_equal_params_decode_latency_grows_with_depth_at_batch_1(hardware):
    family = plan_family(base=GPT2, params=124e6, count=5)
    members = sorted(family.members, key=lambda m: m.shape.n_layers)
    times = [predict_decode(m.shape, hardware=hardware, batch=1, context=512).total_s for m in members]
    assert all(a < b for a, b in zip(times, times[1:])), times
    assert family.depth_span >= 4


def test_without_the_fixed_cost_equal_params_decode_about_equally_fast():
    # the reason the fixed per-op cost exists: a pure roofline says depth barely matters at batch 1
    no_overhead = HardwareSpec(**{**HARDWARE["h100-sxm"].to_dict(), "op_overhead_s": 0.0})
    family = plan_family(base=GPT2, params=124e6, count=5)
    times = [predict_decode(m.shape, hardware=no_overhead, batch=1, context=128).total_s for m in family.members]
    assert max(times) / min(times) < 1.1  # within the family's 5% parameter tolerance and the KV cache
    with_overhead = [predict_decode(m.shape, hardware="h100", batch=1, context=128).total_s for m in family.members]
    assert max(with_overhead) / min(with_overhead) > 3


@pytest.mark.parametrize("call, field", [
    (lambda: predict_decode(GPT2, hardware="h100", batch=0, context=1), "batch"),
    (lambda: predict_decode(GPT2, hardware="h100", batch=1, context=-1), "context"),
    (lambda: predict_prefill(GPT2, hardware="h100", batch=1, prompt_len=8, dtype="fp64"), "fp64"),
    (lambda: predict_prefill(GPT2, hardware="a100", batch=1, prompt_len=8, dtype="fp8"), "fp8"),
    (lambda: predict_forward(GPT2, hardware="h100", batch=1, seq_len=8, pp=13), "pp"),
    (lambda: predict_forward(GPT2, hardware="h100", batch=1, seq_len=8, attn_impl="paged"), "attn_impl"),
    (lambda: predict_forward(GPT2, hardware="cpu", batch=1, seq_len=8, tp=2), "link"),
    (lambda: predict_forward(GPT2, hardware="tpu", batch=1, seq_len=8), "h100-sxm"),
])
def test_bad_input_names_the_problem(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_to_dict():
    d = predict_decode(GPT2, hardware="h100", batch=2, context=64).to_dict()
    assert d["kind"] == "decode" and d["tokens"] == 2 and d["total_ms"] == pytest.approx(d["total_s"] * 1e3)
    assert set(d["by_op"]) == {"norm1", "qkv", "attention", "attn_out", "norm2", "mlp_up", "mlp_act", "mlp_down",
                               "final_norm", "lm_head"}
    assert d["compute_bound_share"] + d["memory_bound_share"] == pytest.approx(1.0)
