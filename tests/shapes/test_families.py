"""Families at equal parameters or compute: every member recomputed independently, spans, drops, errors."""

import math

import pytest

from depthwidth.shapes.families import iso_curve, plan_family
from depthwidth.shapes.flops import flops
from depthwidth.shapes.params import count_params
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape

GPT = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=50304)
TINY = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=256, max_seq_len=128)


@pytest.mark.parametrize("kwargs", [
    dict(base=GPT, params=124e6),
    dict(base=GPT, params=350e6, head_dim=64),
    dict(base=GPT, params=1.3e9, head_dim=128),
    dict(base=GPT, params=85e6, non_embedding=True, count=7),
    dict(base=TINY, params=1e6, align=16, head_dim=16),
    dict(base=PRESETS["llama-2-7b"].shape, params=7e9, head_dim=128),
    dict(base=GPT, params=124e6, tolerance=0.01),
])
def test_every_member_is_within_tolerance_recomputed_by_count_params(kwargs):
    family = plan_family(**kwargs)
    assert family.members
    for m in family.members:
        counts = count_params(m.shape)
        value = counts.non_embedding if kwargs.get("non_embedding") else counts.total
        assert abs(value / kwargs["params"] - 1) <= family.tolerance
        assert m.error == pytest.approx(value / kwargs["params"] - 1)
        assert m.shape.d_model % kwargs.get("align", 64) == 0
        assert m.shape.head_dim == kwargs.get("head_dim", 64)
    assert len(family.members) == len({m.shape for m in family.members})


@pytest.mark.parametrize("params", [50e6, 124e6, 350e6, 1.3e9, 7e9])
def test_members_span_at_least_4x_in_depth_and_many_aspect_ratios(params):
    family = plan_family(base=GPT, params=params, count=5)
    assert len(family.members) == 5
    assert family.depth_span >= 4
    aspects = sorted(m.shape.aspect_ratio for m in family.members)
    assert aspects[-1] / aspects[0] > 16  # L ~ 1/H^2: 4x in depth is 2x in width, 8x in aspect ratio
    # ordered from deep-narrow to shallow-wide
    assert [m.shape.d_model for m in family.members] == sorted(m.shape.d_model for m in family.members)


def test_iso_compute_counts_the_attention_term():
    c, r, seq = 1e18, 20, 2048
    family = plan_family(base=GPT.with_(max_seq_len=seq), train_flops=c, tokens_per_param=r, count=5)
    for m in family.members:
        tokens = r * count_params(m.shape).total
        value = tokens * flops(m.shape, seq_len=seq).train_per_token
        assert m.tokens == pytest.approx(tokens) and abs(value / c - 1) <= 0.05
    # C = 6 N D alone would give N = sqrt(C / (6 r)) for every shape; with attention (6 L T q per token,
    # T/(12 d) of 6N per layer) narrow members get visibly fewer parameters than wide ones.
    assert family.reference_params == pytest.approx(math.sqrt(c / (6 * r)))
    narrow, wide = family.members[0], family.members[-1]
    assert narrow.params < 0.9 * family.reference_params
    assert narrow.params < 0.9 * wide.params
    iso_param = plan_family(base=GPT.with_(max_seq_len=seq), params=family.reference_params,
                            widths=[narrow.shape.d_model])
    assert iso_param.members[0].shape.n_layers > narrow.shape.n_layers


def test_iso_compute_with_a_token_count():
    family = plan_family(base=TINY, train_flops=6 * 1e6 * 20e6, tokens=20e6, align=16, head_dim=16)
    for m in family.members:
        assert m.tokens == 20e6
        assert abs(20e6 * flops(m.shape, seq_len=128).train_per_token / (6 * 1e6 * 20e6) - 1) <= 0.05


def test_reverse_from_depths_drops_what_the_grid_cannot_meet():
    family = plan_family(base=GPT, params=124e6, depths=[6, 12, 24, 48])
    assert [m.shape.n_layers for m in family.members] == [24, 12, 6]  # sorted deep-narrow first
    assert [m.shape.d_model for m in family.members] == [576, 768, 1024]
    (dropped,) = family.dropped
    assert dropped.n_layers == 48 and "L48-H448" in dropped.reason and "tolerance 5%" in dropped.reason
    deep = Shape(n_layers=48, d_model=448, n_heads=7, vocab_size=50304)
    assert dropped.error == pytest.approx(count_params(deep).total / 124e6 - 1)


def test_given_widths_and_their_drops():
    family = plan_family(base=GPT, params=124e6, widths=[100, 768, 2048])
    assert [m.shape.label() for m in family.members] == ["L12-H768-A12"]
    reasons = [d.reason for d in family.dropped]
    assert "width 100 is not a multiple of head_dim 64" in reasons[0]
    assert "L2-H2048" in reasons[1] and "exceed" in reasons[1]


def test_tensor_and_pipeline_parallel_constraints():
    family = plan_family(base=GPT, params=350e6, tp=4, pp=2)
    for m in family.members:
        assert m.shape.n_heads % 4 == 0 and m.shape.d_ff % 4 == 0 and m.shape.n_layers % 2 == 0
    assert any("tp=4" in n for n in family.notes)


def test_conventions_of_the_base_are_kept():
    llama = PRESETS["llama-3-8b"].shape
    family = plan_family(base=llama, params=2e9, head_dim=128)
    group = llama.n_heads // llama.n_kv_heads
    for m in family.members:
        s = m.shape
        assert (s.ffn, s.norm, s.pos, s.vocab_size, s.tie_embeddings) == (llama.ffn, llama.norm, llama.pos,
                                                                          llama.vocab_size, llama.tie_embeddings)
        assert s.n_kv_heads <= max(1, s.n_heads // group)
        if s.n_heads % group == 0:
            assert s.n_kv_heads == s.n_heads // group
        assert s.d_ff % 64 == 0


def test_iso_curve_passes_through_the_members():
    family = plan_family(base=GPT, params=124e6)
    curve = dict(iso_curve(family, widths=[m.shape.d_model for m in family.members]))
    for m in family.members:
        assert curve[m.shape.d_model] == pytest.approx(m.exact_depth)
        assert abs(curve[m.shape.d_model] - m.shape.n_layers) <= 0.5 + 1e-9


@pytest.mark.parametrize("kwargs, message", [
    (dict(params=1e5), "smallest shape on the grid, L2-H64-A1 .* already has 3.384M"),
    (dict(params=124e6, tp=1000), "tp=1000"),
    (dict(params=124e6, tolerance=0.0005), "closest is"),
    (dict(params=124e6, train_flops=1e19), r"give one budget: params alone, .* \(got params, train_flops\)"),
    (dict(train_flops=1e19), r"exactly one of tokens or tokens_per_param \(got train_flops\)"),
    (dict(params=124e6, tokens_per_param=20), r"\(got params, tokens_per_param\)"),
    (dict(train_flops=1e19, tokens_per_param=-1), "tokens_per_param=-1 must be a positive number"),
    (dict(params=124e6, tolerance=5), "tolerance"),
    (dict(params=124e6, align=0), "align"),
    (dict(params=-1), "params"),
])
def test_impossible_or_bad_budgets_raise_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_family(base=GPT, **kwargs)
