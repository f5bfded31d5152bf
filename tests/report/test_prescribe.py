"""The prescription at a target scale: candidates the planner builds, the fit's best and basin, the SLA choice
among the basin, tokens from a FLOPs budget, and the extrapolation stated."""

import math

import pytest

from depthwidth.errors import UserError
from depthwidth.report.fit import Interval
from depthwidth.report.fit_shape import ShapeLawFit, TERMS
from depthwidth.report.prescribe import Limits, Target, candidates, prescribe
from depthwidth.shapes.flops import flops
from depthwidth.shapes.shape import Shape
from shape_law_data import LIU, liu_loss

BASE = Shape(n_layers=2, d_model=64, n_heads=1, vocab_size=50304, max_seq_len=2048)
NAMES = ("E", "c_w", "a_w", "c_l", "a_l", "c_D", "a_D")


def liu_fit(*, spread: float = 0.02, absorbed=None) -> ShapeLawFit:
    """The true Liu law as a fit, with bootstrap samples that move the depth exponent by +-spread."""
    values = tuple(LIU[n] for n in NAMES)
    samples = tuple(tuple(v + (spread * k if n == "a_l" else 0.0) for n, v in zip(NAMES, values))
                    for k in (-1, -0.5, 0, 0.5, 1))
    iv = {n: Interval(value=v, lo=v, hi=v, level=0.9) for n, v in zip(NAMES, values)}
    return ShapeLawFit(form="liu", names=NAMES, values=values, intervals=iv, terms=TERMS["liu"], penalty=False,
                       absorbed=absorbed or {}, ranges={"width": (64, 512), "depth": (2, 16), "tokens": (3e7, 3e9),
                                                        "params": (1e5, 5e7), "aspect": (4, 256)},
                       n_points=48, configs=48, in_sample_error=0.005, level=0.9, samples=samples)


def test_candidates_are_what_the_planner_can_build():
    members = candidates(base=BASE, target=Target(params=1.3e9), align=128, head_dim=64, tp=8)
    assert len(members) > 5
    for m in members:
        s = m.shape
        assert s.d_model % 128 == 0 and s.head_dim == 64 and s.n_heads % 8 == 0
        assert abs(m.params / 1.3e9 - 1) <= 0.05 and 4 <= s.aspect_ratio <= 512
    assert [m.shape.n_layers for m in members] == sorted(m.shape.n_layers for m in members)


def test_the_best_is_the_true_optimum_and_the_basin_surrounds_it():
    target = Target(params=1.3e9, tokens=26e9)
    members = candidates(base=BASE, target=target)
    pres = prescribe(liu_fit(spread=0.1), members=members, target=target, limits=Limits(hardware="h100"))
    truth = {m.shape.label(): liu_loss(m.shape.d_model, m.shape.n_layers, 26e9) for m in members}
    assert pres.best.label == min(truth, key=truth.get)
    assert pres.best.loss.value == pytest.approx(truth[pres.best.label])
    assert pres.best.gap.value == 0.0 and pres.best.in_basin
    basin = [c for c in pres.candidates if c.in_basin]
    assert 1 < len(basin) < len(pres.candidates)  # the depth exponent's spread makes a basin, not everything
    assert pres.basin_depths == (min(c.shape.n_layers for c in basin), max(c.shape.n_layers for c in basin))
    for c in pres.candidates:  # a shape is out of the basin exactly when every sample puts it above the best
        assert c.in_basin == (c.gap.lo <= 0)
    assert pres.optimum_depths[0] <= pres.best.shape.n_layers <= pres.optimum_depths[1]
    assert all(c.tokens == 26e9 and c.decode_source == "predicted for h100-sxm (eager)" for c in pres.candidates)
    assert pres.chosen is not None and pres.chosen.in_basin
    assert pres.chosen.decode_ms == min(c.decode_ms for c in basin)  # no limit: the fastest equally good shape
    assert "the liu fit puts the lowest loss at " + pres.best.label in pres.verdict
    assert pres.extrapolation["params"] == pytest.approx(pres.best.non_embedding_params / 5e7)
    assert "This is an extrapolation beyond the measured range (params" in pres.verdict


def test_a_latency_limit_is_met_inside_the_basin():
    target = Target(params=1.3e9, tokens=26e9)
    members = candidates(base=BASE, target=target)
    free = prescribe(liu_fit(spread=0.05), members=members, target=target, limits=Limits(hardware="h100"))
    basin = sorted((c for c in free.candidates if c.in_basin), key=lambda c: c.decode_ms)
    limit = (basin[0].decode_ms + basin[1].decode_ms) / 2  # only the fastest basin shape meets it
    pres = prescribe(liu_fit(spread=0.05), members=members, target=target,
                     limits=Limits(hardware="h100", max_decode_ms=limit))
    assert pres.chosen.label == basin[0].label and pres.chosen.feasible
    assert [c.label for c in pres.candidates if c.in_basin and c.feasible] == [basin[0].label]
    assert f"the fastest ({pres.chosen.decode_ms:.3g} ms per token on h100" in pres.verdict
    none = prescribe(liu_fit(), members=members, target=target, limits=Limits(hardware="h100", max_decode_ms=1e-6))
    assert none.chosen is None and "No candidate meets the limits." in none.verdict


def test_a_flops_budget_sets_each_shapes_tokens():
    target = Target(params=1.3e9, flops=2e20)
    members = candidates(base=BASE, target=target)
    pres = prescribe(liu_fit(), members=members, target=target)
    for c in pres.candidates:
        per_token = flops(c.shape, seq_len=2048).train_per_token
        assert c.tokens == pytest.approx(2e20 / per_token) and c.train_flops == pytest.approx(2e20)
    deep, shallow = pres.candidates[-1], pres.candidates[0]
    assert deep.tokens < shallow.tokens  # the attention FLOPs of depth leave fewer tokens
    assert "and 2e+20 training FLOPs" in pres.verdict


def test_one_measured_token_budget_leaves_the_level_undetermined():
    fit = liu_fit(absorbed={"tokens": 3e8})
    target = Target(params=1.3e9, tokens=26e9)
    pres = prescribe(fit, members=candidates(base=BASE, target=target), target=target)
    assert pres.loss_undetermined == ("the data hold one scale of tokens 2.6e+10 (measured only at 3e+07 to 3e+09), so "
                                      "its term is folded into E")
    assert "its loss level is not determined by the data" in pres.verdict


def test_bad_targets_are_refused():
    with pytest.raises(UserError, match="give the target's tokens or its training FLOPs, not both"):
        Target(params=1e9, tokens=1e10, flops=1e20)
    with pytest.raises(UserError, match="params=-1.0 must be a positive number"):
        Target(params=-1.0)
    with pytest.raises(UserError, match="no shape is within"):
        candidates(base=BASE, target=Target(params=1e3))
    assert math.isclose(Target(params=1e9).seq_len, 2048)
