import pytest

from depthwidth.report.noise import curve_tail_noise, estimate_noise
from depthwidth.report.recommend import Constraints, recommend
from report_helpers import curve, result


def _family(losses_by_shape, decode):
    shapes = [(2, 128), (4, 96), (8, 64), (16, 48)]
    return [result(L, d, losses, decode_ms=ms) for (L, d), losses, ms in zip(shapes, losses_by_shape, decode)]


def test_clear_winner_is_crowned_on_loss():
    rows = _family([[3.00, 3.01], [3.20, 3.21], [3.40, 3.41], [3.60, 3.62]], [1.0, 2.0, 3.0, 4.0])
    rec = recommend(rows, Constraints(hardware="cpu"))
    assert rec.decided_by == "loss" and not rec.within_noise
    assert rec.chosen is rec.best and rec.chosen.result.shape_label == rows[0].shape_label
    assert rec.trade is None
    assert rec.noise.method == "seeds" and rec.noise.sigma == pytest.approx(0.0075, abs=2e-3)


def test_noise_swamps_the_differences_and_it_says_so():
    # Means 3.050, 3.050, 3.020, 3.060 with a seed spread of ~0.05: no shape is better than another.
    rows = _family([[3.00, 3.10], [3.02, 3.08], [3.05, 2.99], [3.03, 3.09]], [1.0, 2.0, 3.0, 4.0])
    rec = recommend(rows, Constraints(hardware="cpu"))
    assert rec.within_noise and rec.decided_by.startswith("latency")
    assert len(rec.tied) == 4
    assert "No winner on loss" in rec.verdict and "within noise" in rec.verdict
    # the lowest-loss shape is (8, 64); the tie is broken by latency in favour of the 1 ms shape
    assert rec.best.result.shape_label == rows[2].shape_label
    assert rec.chosen.result.shape_label == rows[0].shape_label
    assert rec.trade.startswith("+0.030 loss (within noise) for 67% lower decode latency")


def test_latency_limit_trades_loss_for_speed():
    rows = _family([[3.00, 3.01], [3.20, 3.21], [3.40, 3.41], [3.60, 3.62]], [4.0, 1.5, 1.2, 1.0])
    rec = recommend(rows, Constraints(hardware="cpu", max_decode_ms=2.0))
    assert rec.chosen.result.shape_label == rows[1].shape_label and rec.decided_by == "loss"
    assert not rec.candidates[0].feasible and "decode 4 ms > 2 ms" in rec.candidates[0].reasons
    # (3.205 - 3.005) = +0.200 loss; (4.0 - 1.5) / 4.0 = 62% lower latency
    assert rec.trade.startswith("+0.200 loss for 62% lower decode latency")
    assert "measured on cpu (the study's machine)" == rec.chosen.target.decode_source


def test_nothing_feasible_names_the_fastest():
    rows = _family([[3.0, 3.01], [3.2, 3.21], [3.4, 3.41], [3.6, 3.62]], [4.0, 3.0, 2.5, 2.2])
    rec = recommend(rows, Constraints(hardware="cpu", max_decode_ms=1.0))
    assert rec.chosen is None and rec.decided_by == "none"
    assert "No shape meets" in rec.verdict and rows[3].shape_label in rec.verdict


def test_other_hardware_is_predicted_and_says_so():
    rows = _family([[3.0, 3.01], [3.2, 3.21], [3.4, 3.41], [3.6, 3.62]], [4.0, 3.0, 2.5, 2.2])
    rec = recommend(rows, Constraints(hardware="h100"))
    for c in rec.candidates:
        assert c.target.decode_source == "predicted for h100-sxm (eager)"
        assert 0 < c.target.decode_ms < 1.0  # tiny models on an H100: launch-bound, well under a millisecond
    # at equal width budget the deepest shape walks the most layers: predicted slowest on the H100
    by_depth = sorted(rec.candidates, key=lambda c: c.result.n_layers)
    assert by_depth[-1].target.decode_ms > by_depth[0].target.decode_ms


def test_the_studys_machine_is_its_own_measurements_and_measured_is_refused():
    rows = _family([[3.00, 3.01], [3.20, 3.21], [3.40, 3.41], [3.60, 3.62]], [4.0, 1.5, 1.2, 1.0])
    rec = recommend(rows, Constraints(hardware="study", max_decode_ms=2.0))
    assert rec.chosen.result.shape_label == rows[1].shape_label
    assert all(c.target.decode_source == "measured on cpu (the study's machine)" for c in rec.candidates)
    assert "on the study's machine" in rec.verdict and rec.to_dict()["constraints"]["hardware"] == "study"
    with pytest.raises(ValueError, match=r"'measured' means this machine's profile.*use hardware study"):
        recommend(rows, Constraints(hardware="measured"))


def test_memory_limit_uses_serving_memory():
    rows = _family([[3.0, 3.01], [3.2, 3.21], [3.4, 3.41], [3.6, 3.62]], [1.0, 1.0, 1.0, 1.0])
    rec = recommend(rows, Constraints(hardware="cpu", max_memory_gb=1e-9))
    assert rec.chosen is None
    assert all("memory" in c.reasons[0] for c in rec.candidates)


def test_one_seed_uses_the_eval_curve_and_calls_it_a_lower_bound():
    rows = [result(2, 128, [3.00], curves=[curve(0, 3.00, 0.02)]),
            result(8, 64, [3.01], curves=[curve(0, 3.01, 0.02)])]
    noise = estimate_noise(rows)
    assert noise.method == "eval-curve" and "lower bound" in noise.description
    assert noise.sigma > 0.01
    rec = recommend(rows, Constraints(hardware="cpu"))
    assert rec.within_noise


def test_no_noise_estimate_names_the_lowest_loss_unverified():
    rows = [result(2, 128, [3.00], decode_ms=2.0), result(8, 64, [3.50], decode_ms=1.0)]
    rec = recommend(rows, Constraints(hardware="cpu"))
    assert rec.noise.method == "none" and rec.decided_by == "loss (noise unknown)" and not rec.within_noise
    assert rec.chosen.result.shape_label == rows[0].shape_label
    assert "not checked against noise" in rec.verdict and "+0.5000" in rec.verdict


def test_curve_tail_noise_needs_five_evaluations():
    assert curve_tail_noise([1, 10, 100, 1000], [4.0, 3.0, 2.0, 1.0]) is None
    rss, dof = curve_tail_noise([1, 10, 100, 1000, 10000], [5.0, 4.0, 3.0, 2.0, 1.0])
    assert rss == pytest.approx(0.0, abs=1e-12) and dof == 2


def test_bad_constraints():
    with pytest.raises(ValueError, match="max_decode_ms"):
        Constraints(hardware="cpu", max_decode_ms=-1)
    rows = _family([[3.0, 3.01]] * 4, [1.0] * 4)
    with pytest.raises(ValueError, match="h9000"):
        recommend(rows, Constraints(hardware="h9000"))
    with pytest.raises(ValueError, match="group='nope'"):
        recommend(rows, Constraints(hardware="cpu", group="nope"))


def test_curve_tail_noise_does_not_count_curvature_as_noise():
    import math

    tokens = [2.0**k for k in range(10, 16)]
    falling = [3.0 - 0.3 * math.log(t) + 0.02 * math.log(t) ** 2 for t in tokens]  # convex, still falling
    rss, dof = curve_tail_noise(tokens, falling)
    assert rss == pytest.approx(0.0, abs=1e-12) and dof == 3
    wiggly = [v + (0.01 if i % 2 else -0.01) for i, v in enumerate(falling)]
    rss, dof = curve_tail_noise(tokens, wiggly)
    assert 0.005 < (rss / dof) ** 0.5 < 0.02
