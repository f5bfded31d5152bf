"""The fitter recovers known parameters from synthetic data drawn from the law it fits."""

import math

import numpy as np
import pytest

from depthwidth.report.fit import Interval, fit_power_law


def _draw_ln(*, E, A, alpha, sigma, seed, scales=6, seeds=2):
    rng = np.random.default_rng(seed)
    n = np.repeat(np.geomspace(1e5, 1e8, scales), seeds)
    loss = (E + A / n**alpha) * np.exp(rng.normal(0.0, sigma, n.size))
    return n, loss


@pytest.mark.parametrize("data_seed", [1, 2])
def test_recovers_l_of_n_within_its_intervals(data_seed):
    true = {"E": 1.8, "A": 60.0, "alpha": 0.35}
    n, loss = _draw_ln(**true, sigma=0.005, seed=data_seed)
    fit = fit_power_law(n=n, loss=loss, n_bootstrap=100, seed=0)
    for name, value in true.items():
        iv = fit.intervals[name]
        assert iv.contains(value), (name, value, iv)
    # The intervals are informative, not a blanket: the exponent is pinned to within +-0.05.
    assert fit.intervals["alpha"].hi - fit.intervals["alpha"].lo < 0.1
    assert abs(fit.E - true["E"]) < 0.05
    assert fit.warnings == ()
    assert fit.distinct_n == 6 and fit.n_points == 12


def test_noise_free_data_is_fitted_exactly():
    n = np.geomspace(1e4, 1e9, 8)
    loss = 2.0 + 400.0 / n**0.3
    fit = fit_power_law(n=n, loss=loss, n_bootstrap=0)
    assert fit.E == pytest.approx(2.0, rel=1e-3)
    assert fit.A == pytest.approx(400.0, rel=2e-2)
    assert fit.alpha == pytest.approx(0.3, abs=2e-3)
    assert fit.predict(1e12) == pytest.approx(2.0 + 400.0 / 1e12**0.3, rel=1e-4)


def test_recovers_chinchilla_joint_law_within_its_intervals():
    # Hoffmann et al. 2022, eq. 10: E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28.
    true = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
    rng = np.random.default_rng(3)
    nn, dd = (a.ravel() for a in np.meshgrid(np.geomspace(1e6, 1e9, 5), np.geomspace(1e8, 1e11, 5)))
    loss = (true["E"] + true["A"] / nn ** true["alpha"] + true["B"] / dd ** true["beta"]) * np.exp(
        rng.normal(0, 0.005, nn.size))
    fit = fit_power_law(n=nn, d=dd, loss=loss, n_bootstrap=40, seed=0)
    for name, value in true.items():
        assert fit.intervals[name].contains(value), (name, value, fit.intervals[name])
    assert fit.joint and fit.distinct_d == 5
    band = fit.predict_interval(1e10, 2e11)
    truth = true["E"] + true["A"] / 1e10 ** true["alpha"] + true["B"] / 2e11 ** true["beta"]
    assert band.lo <= truth <= band.hi


def test_bootstrap_is_reproducible_with_a_seed():
    n, loss = _draw_ln(E=1.8, A=60.0, alpha=0.35, sigma=0.01, seed=5)
    a = fit_power_law(n=n, loss=loss, n_bootstrap=20, seed=7)
    b = fit_power_law(n=n, loss=loss, n_bootstrap=20, seed=7)
    c = fit_power_law(n=n, loss=loss, n_bootstrap=20, seed=8)
    assert a.intervals == b.intervals
    assert a.intervals != c.intervals


def test_two_scales_warn_that_the_law_is_not_determined():
    n = [1e5, 1e5, 1e6, 1e6]
    fit = fit_power_law(n=n, loss=[3.0, 3.01, 2.5, 2.52], n_bootstrap=5)
    assert fit.distinct_n == 2
    assert any("2 distinct parameter count" in w for w in fit.warnings)


def test_collinear_n_and_d_warn():
    n = np.geomspace(1e5, 1e8, 6)
    d = 20 * n
    loss = 1.7 + 50 / n**0.3 + 50 / d**0.3
    fit = fit_power_law(n=n, d=d, loss=loss, n_bootstrap=0)
    assert any("cannot be separated" in w for w in fit.warnings)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": [1, 2], "loss": [1, 2]}, "need at least 3"),
        ({"n": [1, 2, 3], "loss": [1, 2]}, "one loss per point"),
        ({"n": [1, -2, 3], "loss": [1, 2, 3]}, "n has non-positive"),
        ({"n": [1, 2, 3], "loss": [1, 2, math.nan]}, "loss has non-positive"),
        ({"n": [1, 2, 3, 4, 5], "loss": [1, 2, 3, 4, 5], "d": [1, 2]}, "one token count per point"),
    ],
)
def test_bad_input_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_power_law(**kwargs, n_bootstrap=0)


def test_interval_overlap():
    a = Interval(value=1.0, lo=0.9, hi=1.1, level=0.95)
    assert a.overlaps(Interval(value=1.2, lo=1.05, hi=1.3, level=0.95))
    assert not a.overlaps(Interval(value=1.3, lo=1.2, hi=1.4, level=0.95))
