import numpy as np
import pytest

from depthwidth.report.trends import TrendPoint, family_of, fit_trends


def _points(*, scales, aspects, penalty, seed=0, sigma=0.003):
    rng = np.random.default_rng(seed)
    pts = []
    for n in scales:
        for ar in aspects:
            for _ in range(2):
                loss = (1.8 + 30.0 / n**0.3 + penalty(ar)) * np.exp(rng.normal(0, sigma))
                pts.append(TrendPoint(label=f"ar{ar}-n{n:.0f}", aspect_ratio=ar, n=n, d=1e6, loss=float(loss)))
    return pts


def test_family_bins_by_powers_of_two():
    assert family_of(30.0) == "d/L~32" and family_of(24.0) == "d/L~32" and family_of(22.0) == "d/L~16"
    assert family_of(22.0, bins_per_octave=2) == "d/L~22.6"
    with pytest.raises(ValueError, match="aspect_ratio"):
        family_of(0.0)


def test_clear_best_aspect_ratio_over_four_scales_is_supported():
    pts = _points(scales=np.geomspace(1e5, 8e6, 4), aspects=(4, 32), penalty=lambda ar: 0.15 if ar == 4 else 0.0)
    tr = fit_trends(pts, factors=(4.0,), n_bootstrap=40)
    assert tr.best_family == "d/L~32"
    assert tr.supported and tr.warnings == ()
    fam = {f.family: f for f in tr.families}
    assert fam["d/L~32"].fit.intervals["alpha"].contains(0.3)
    best = next(p for p in tr.extrapolation if p.family == "d/L~32")
    other = next(p for p in tr.extrapolation if p.family == "d/L~4")
    assert best.factor == pytest.approx(4.0) and best.n == pytest.approx(3.2e7)
    assert best.loss.hi < other.loss.lo  # separated bands: that is what "supported" means
    assert abs(best.loss.value - (1.8 + 30.0 / best.n**0.3)) < 0.03


@pytest.mark.slow
def test_extrapolation_bands_cover_the_truth_at_about_their_level():
    hits = 0
    for draw in range(20):
        pts = _points(scales=np.geomspace(1e5, 8e6, 4), aspects=(32,), penalty=lambda ar: 0.0, seed=100 + draw)
        tr = fit_trends(pts, factors=(4.0,), n_bootstrap=100, seed=draw)
        band = tr.extrapolation[0].loss
        hits += band.lo <= 1.8 + 30.0 / tr.extrapolation[0].n ** 0.3 <= band.hi
    assert hits >= 15  # nominal 95%; a percentile bootstrap of 8 points covers about 90% (18 of 20 other draws)


def test_overlapping_bands_and_few_scales_say_the_data_cannot_support_it():
    pts = _points(scales=(1e5, 1e6), aspects=(4, 32), penalty=lambda ar: 0.002 if ar == 4 else 0.0, sigma=0.01)
    tr = fit_trends(pts, n_bootstrap=30)
    assert not tr.supported
    text = " ".join(tr.warnings)
    assert "only 2 scales" in text and "overlap" in text and "100x beyond" in text


def test_one_scale_fits_nothing_and_says_why():
    pts = _points(scales=(1e5,), aspects=(4, 16, 64), penalty=lambda ar: 0.0)
    tr = fit_trends(pts, n_bootstrap=5)
    assert tr.best_family is None and not tr.supported and tr.extrapolation == ()
    assert all(f.fit is None and "1 scale" in f.skipped for f in tr.families)
    assert "does not transfer" in tr.warnings[0]


def test_joint_fit_when_tokens_vary_independently():
    rng = np.random.default_rng(2)
    pts = []
    for n in np.geomspace(1e5, 1e7, 3):
        for d in np.geomspace(1e7, 1e9, 3):
            loss = (1.7 + 40 / n**0.3 + 60 / d**0.25) * np.exp(rng.normal(0, 0.002))
            pts.append(TrendPoint(label="x", aspect_ratio=32.0, n=float(n), d=float(d), loss=float(loss)))
    tr = fit_trends(pts, n_bootstrap=5)
    joint = tr.families[0].joint_fit
    assert joint is not None and joint.beta == pytest.approx(0.25, abs=0.1)


def test_members_of_one_family_are_one_scale():
    from depthwidth.report.trends import count_scales

    assert count_scales([491e3, 499e3, 520e3, 519e3, 498e3]) == 1
    assert count_scales([1e5, 1.1e5, 4e5, 4.4e5, 1.6e6]) == 3
    # two shapes of one budget binned into one aspect-ratio family are not a trend
    pts = [TrendPoint(label=a, aspect_ratio=ar, n=n, d=1e6, loss=2.5) for a, ar, n in
           (("L4", 26.0, 520e3), ("L3", 40.0, 519e3))]
    tr = fit_trends(pts, n_bootstrap=2)
    assert tr.families[0].fit is None and tr.families[0].distinct_n == 1
