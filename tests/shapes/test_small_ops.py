"""The small-size corrections of the roofline: kernel curves, dispatched-op counts, execution modes,
and the launch term of a training step."""

from __future__ import annotations

import dataclasses

import pytest

from depthwidth.errors import UserError
from depthwidth.shapes.flops import layer_ops
from depthwidth.shapes.hardware import HARDWARE, HardwareSpec
from depthwidth.shapes.latency import predict_decode, predict_prefill, predict_train_step
from depthwidth.shapes.shape import Shape
from depthwidth.shapes.small_ops import OPTIMIZER_OPS, check_curves, curve_seconds

SHAPE = Shape(n_layers=4, d_model=64, n_heads=8, vocab_size=256, max_seq_len=128)
CPU = HARDWARE["cpu"]


def test_curve_interpolates_in_log_log_and_extrapolates_at_the_end_rates() -> None:
    curve = check_curves({"matmul:fp32": [[1e6, 1e-5], [1e4, 1e-6]]})["matmul:fp32"]
    assert curve == ((1e4, 1e-6), (1e6, 1e-5))  # sorted by work
    assert curve_seconds(curve, 1e5) == pytest.approx(10 ** -5.5)  # halfway in log-log
    assert curve_seconds(curve, 1e4) == pytest.approx(1e-6)
    assert curve_seconds(curve, 4e6) == pytest.approx(4e-5)  # the last point's rate beyond it
    assert curve_seconds(curve, 5e3) == pytest.approx(5e-7)  # proportional below the first
    assert curve_seconds(curve, 0) == 0.0
    flat = ((1e3, 0.0), (1e5, 2e-6))
    assert curve_seconds(flat, 5.05e4) == pytest.approx(1e-6)  # linear where a point is zero


@pytest.mark.parametrize(("curves", "match"), [
    ({"conv:fp32": [[1, 1]]}, "kernel one of matmul"),
    ({"matmul": [[1, 1]]}, "kernel:dtype"),
    ({"matmul:fp32": [[0, 1]]}, "work > 0"),
    ({"matmul:fp32": [[1, -1]]}, "seconds >= 0"),
    ({"matmul:fp32": "fast"}, "pairs"),
    ([1, 2], "must map"),
])
def test_bad_curves_are_refused_naming_the_entry(curves, match) -> None:
    with pytest.raises(UserError, match=match):
        check_curves(curves)


def test_a_spec_with_curves_round_trips_and_old_dicts_still_load() -> None:
    spec = dataclasses.replace(CPU, op_curves={"gelu:fp32": [[1e3, 1e-6]]}, dispatch_overhead_s=3e-6)
    assert HardwareSpec.from_dict(spec.to_dict()) == spec
    old = {k: v for k, v in CPU.to_dict().items() if k not in ("op_curves", "dispatch_overhead_s")}
    assert HardwareSpec.from_dict(old) == CPU and CPU.op_curves == {} and CPU.dispatch_overhead_s is None
    with pytest.raises(UserError, match="dispatch_overhead_s"):
        dataclasses.replace(CPU, dispatch_overhead_s=-1.0)


def test_a_matmul_curve_prices_the_matmuls_and_nothing_else() -> None:
    slow = 1e-3  # one millisecond per MFLOP: far slower than the roofline
    spec = dataclasses.replace(CPU, op_curves={"matmul:fp32": [[1e6, slow]]})
    plain = predict_prefill(SHAPE, hardware=CPU, batch=1, prompt_len=64, dtype="fp32", logits="all")
    curved = predict_prefill(SHAPE, hardware=spec, batch=1, prompt_len=64, dtype="fp32", logits="all")
    ops = {op.name: op for op in layer_ops(SHAPE, batch=1, new_tokens=64)}
    for name in ("qkv", "mlp_up", "mlp_down", "attn_out"):
        assert curved.by_op[name] == pytest.approx(ops[name].flops / 1e6 * slow * SHAPE.n_layers
                                                   + CPU.op_overhead_s * SHAPE.n_layers)
    for name in ("norm1", "mlp_act", "attention"):  # no curve for them: the plain roofline
        assert curved.by_op[name] == pytest.approx(plain.by_op[name])
    assert curved.total_s > plain.total_s


def test_dispatched_ops_replace_the_inventory_fixed_cost() -> None:
    spec = dataclasses.replace(CPU, dispatch_overhead_s=2e-6)
    counted = predict_decode(SHAPE, hardware=spec, batch=1, context=16, dtype="fp32", dispatched_ops=500)
    inventory = predict_decode(SHAPE, hardware=spec, batch=1, context=16, dtype="fp32")
    assert counted.overhead_s == pytest.approx(1e-3) and counted.by_op["dispatch"] == pytest.approx(1e-3)
    # fused attention (the default): scores, softmax and values are one op per layer
    n_inventory = sum(op.repeat for op in layer_ops(SHAPE, batch=1, new_tokens=1, past_tokens=16)) - 2 * SHAPE.n_layers
    assert inventory.overhead_s == pytest.approx(n_inventory * CPU.op_overhead_s)
    assert counted.total_s - counted.overhead_s == pytest.approx(inventory.total_s - inventory.overhead_s)
    # without a measured cost per dispatched op the count is not used
    assert predict_decode(SHAPE, hardware=CPU, batch=1, context=16, dtype="fp32", dispatched_ops=500) == inventory


def test_execution_modes_order_the_fixed_costs() -> None:
    costs = {ex: predict_decode(SHAPE, hardware="h100", batch=1, context=16, execution=ex) for ex in
             ("eager", "compiled", "graph")}
    assert costs["eager"].overhead_s > costs["compiled"].overhead_s > costs["graph"].overhead_s == 0.0
    # compiled: one launch per matmul and attention kernel per layer, plus the head
    assert costs["compiled"].overhead_s == pytest.approx((5 * SHAPE.n_layers + 1) * HARDWARE["h100-sxm"].op_overhead_s)
    assert all(c.execution == ex for ex, c in costs.items()) and costs["graph"].to_dict()["execution"] == "graph"
    with pytest.raises(UserError, match="execution"):
        predict_decode(SHAPE, hardware="h100", batch=1, context=16, execution="jit")


def test_train_step_launches_make_eager_deep_narrow_slower_on_a_gpu() -> None:
    deep = Shape(n_layers=13, d_model=56, n_heads=7, vocab_size=256, max_seq_len=128)
    wide = Shape(n_layers=2, d_model=144, n_heads=18, vocab_size=256, max_seq_len=128)
    kw = dict(hardware="h200", seq_len=128, global_batch=16, micro_batch=16)
    eager = {s.n_layers: predict_train_step(s, **kw) for s in (deep, wide)}
    graph = {s.n_layers: predict_train_step(s, execution="graph", **kw) for s in (deep, wide)}
    # launch-bound: (3 x ops per forward + the optimizer's) x 5 us, compute hidden behind it
    n_ops = sum(op.repeat for op in layer_ops(deep, batch=1, new_tokens=1)) - 2 * 13  # fused attention: 3 ops -> 1
    assert eager[13].total_s == pytest.approx((3 * n_ops + OPTIMIZER_OPS) * 5e-6, rel=0.01)
    assert eager[13].total_s / eager[2].total_s > 4
    assert graph[13].overhead_s == 0 and graph[13].total_s < eager[13].total_s / 50
    # a CPU does not overlap dispatch with compute: the launch adds
    cpu = predict_train_step(deep, hardware="cpu", seq_len=128, global_batch=16, micro_batch=16)
    assert cpu.total_s == pytest.approx(cpu.by_op["compute"] + cpu.by_op["launch"])


def test_attention_curves_per_head_size_are_chosen_interpolated_and_extended() -> None:
    from depthwidth.shapes.small_ops import attention_curve, find_curve

    curves = check_curves({"attention@8:fp32": [[1e6, 4e-5], [1e7, 2e-4]],
                           "attention@32:fp32": [[1e6, 1e-5], [1e7, 5e-5]],
                           "attention:bf16": [[1e6, 3e-5]]})
    assert attention_curve(curves, "fp32", head_dim=8) == ((1e6, 4e-5), (1e7, 2e-4))
    mid = attention_curve(curves, "fp32", head_dim=16)  # halfway in log head size: geometric mean
    assert mid[0] == (1e6, pytest.approx(2e-5)) and mid[1] == (1e7, pytest.approx(1e-4))
    small = attention_curve(curves, "fp32", head_dim=4)  # the same scores as head size 8: half the FLOPs
    assert small == ((5e5, 4e-5), (5e6, 2e-4))
    assert attention_curve(curves, "fp32", head_dim=128) == ((1e6, 1e-5), (1e7, 5e-5))
    assert attention_curve(curves, "bf16", head_dim=64) == ((1e6, 3e-5),)  # an earlier profile's one curve
    assert attention_curve(curves, "fp16", head_dim=64) is None
    assert find_curve(curves, None, "fp32", head_dim=8) is None
    with pytest.raises(UserError, match="attention@<head size>"):
        check_curves({"matmul@8:fp32": [[1, 1]]})
    with pytest.raises(UserError, match="attention@<head size>"):
        check_curves({"attention@x:fp32": [[1, 1]]})


def test_a_head_of_8_is_priced_at_its_own_curve_not_at_the_flops_of_a_head_of_16() -> None:
    """A CPU's fused attention costs about the same per head at head sizes 8 and 16 (measured), so
    at equal FLOPs the curve of head size 8 is twice as slow; a shape of head size 8 gets it."""
    narrow = Shape(n_layers=2, d_model=64, n_heads=8, vocab_size=256, max_seq_len=128)  # head size 8
    curves = {"attention@8:fp32": [[1e5, 2e-5], [1e7, 2e-3]], "attention@16:fp32": [[1e5, 1e-5], [1e7, 1e-3]]}
    spec = dataclasses.replace(CPU, op_curves=curves)
    wide = Shape(n_layers=2, d_model=128, n_heads=8, vocab_size=256, max_seq_len=128)  # head size 16
    kw = dict(hardware=spec, batch=1, prompt_len=64, dtype="fp32", logits="all")
    narrow_s = predict_prefill(narrow, **kw).by_op["attention"]
    ratio = narrow_s / predict_prefill(wide, **kw).by_op["attention"]
    one_curve = dataclasses.replace(CPU, op_curves={"attention:fp32": curves["attention@16:fp32"]})
    fixed = CPU.op_overhead_s * narrow.n_layers
    assert narrow_s - fixed == pytest.approx(2 * (predict_prefill(narrow, **dict(kw, hardware=one_curve)).by_op[
        "attention"] - fixed))  # priced by FLOPs on the head-16 curve it would be half
    assert ratio == pytest.approx(1.0, rel=1e-9)  # 8 heads of 8 cost what 8 heads of 16 do: same scores


def test_the_in_forward_factor_scales_curve_priced_kernels_of_eager_calls_only() -> None:
    from depthwidth.shapes.small_ops import check_in_forward, in_forward_at

    points = check_in_forward({"fp32": [[1e-4, 1.2], [1e-5, 2.0]], "bf16": 1.5})
    assert points["fp32"] == ((1e-5, 2.0), (1e-4, 1.2))
    assert in_forward_at(points["fp32"], 1e-6) == 2.0 and in_forward_at(points["fp32"], 1e-3) == 1.2
    assert in_forward_at(points["fp32"], 10 ** -4.5) == pytest.approx(1.6)  # halfway in log seconds
    assert in_forward_at(points["bf16"], 1.0) == 1.5 and in_forward_at((), 1e-5) == 1.0
    curves = {"matmul:fp32": [[1e6, 1e-5], [1e8, 1e-3]], "gelu:fp32": [[1e3, 1e-6], [1e6, 1e-3]]}
    plain = dataclasses.replace(CPU, op_curves=curves)
    slow = dataclasses.replace(plain, kernel_in_forward={"fp32": 2.0})
    kw = dict(batch=1, prompt_len=64, dtype="fp32", logits="all")
    a, b = predict_prefill(SHAPE, hardware=plain, **kw), predict_prefill(SHAPE, hardware=slow, **kw)
    for name in ("qkv", "mlp_up", "mlp_act", "lm_head"):  # curve-priced: twice the kernel seconds
        fixed = CPU.op_overhead_s * (1 if name == "lm_head" else SHAPE.n_layers)
        assert b.by_op[name] - fixed == pytest.approx(2 * (a.by_op[name] - fixed))
    assert b.by_op["norm1"] == a.by_op["norm1"]  # no norm curve: the plain roofline
    compiled = dict(kw, execution="compiled")
    assert predict_prefill(SHAPE, hardware=slow, **compiled).total_s == predict_prefill(
        SHAPE, hardware=plain, **compiled).total_s
    assert HardwareSpec.from_dict(slow.to_dict()) == slow
    with pytest.raises(UserError, match=r"kernel_in_forward\['fp32'\]"):
        dataclasses.replace(CPU, kernel_in_forward={"fp32": [[1e-5, 0.0]]})


def test_a_one_row_matmul_takes_the_gemv_curve_where_there_is_one() -> None:
    curves = {"matmul:fp32": [[1e4, 1e-4], [1e8, 1.0]], "gemv:fp32": [[1e4, 5e-4], [1e8, 5.0]]}  # kernel-bound
    spec = dataclasses.replace(CPU, op_curves=curves)
    no_gemv = dataclasses.replace(CPU, op_curves={"matmul:fp32": curves["matmul:fp32"]})
    fixed = CPU.op_overhead_s * SHAPE.n_layers
    decode = predict_decode(SHAPE, hardware=spec, batch=1, context=64, dtype="fp32").by_op["mlp_up"] - fixed
    plain = predict_decode(SHAPE, hardware=no_gemv, batch=1, context=64, dtype="fp32").by_op["mlp_up"] - fixed
    assert decode == pytest.approx(5 * plain)  # one row: the gemv curve, five times the matmul one here
    kw = dict(batch=2, context=64, dtype="fp32")  # two rows: the matmul curve
    assert predict_decode(SHAPE, hardware=spec, **kw).total_s == predict_decode(SHAPE, hardware=no_gemv, **kw).total_s
    kw = dict(batch=1, prompt_len=64, dtype="fp32", logits="all")
    assert predict_prefill(SHAPE, hardware=spec, **kw).total_s == predict_prefill(SHAPE, hardware=no_gemv, **kw).total_s
