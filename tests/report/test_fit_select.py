"""The held-out score keeps a configuration's seeds together and picks the form the data were drawn from."""

import pytest

from depthwidth.errors import UserError
from depthwidth.report.fit_select import _splits, held_out, select_form
from shape_law_data import draw


def test_a_configurations_seeds_are_held_out_together():
    points = draw(seed=0, seeds=2, widths=(64, 128, 256), depths=(2, 8), tokens=(1e8, 1e9))
    for train, test in _splits(points, n_splits=5, test_fraction=0.2, seed=0):
        held = {p.config for p in test}
        assert len(held) == 2 and len(test) == 4  # 20% of 12 configurations, both seeds of each
        assert not held & {p.config for p in train}
        assert len(train) + len(test) == len(points)


def test_points_drawn_from_the_liu_form_select_it():
    points = draw(seed=2, sigma=0.003, widths=(64, 128, 256, 512), depths=(2, 4, 8, 16), tokens=(3e7, 3e9))
    sel = select_form(points, n_splits=6)
    assert sel.best == "liu" and sel.supported
    liu, *others = sel.scores
    assert liu.form == "liu" and 0.002 < liu.mean_error < 0.006  # held-out error near the 0.3% noise
    assert all(o.mean_error > 2 * liu.mean_error for o in others)
    assert len(liu.split_errors) == 6 and liu.in_sample_error < liu.mean_error
    assert sel.line.startswith("held-out error (mean |L_hat - L| / L over 6 random 80%/20% splits of 32 "
                               "configurations)")
    assert "; the data support liu: lower held-out error than" in sel.line and "on 6 of 6 splits" in sel.line


def test_points_drawn_from_the_aspect_form_select_it():
    points = draw(seed=4, sigma=0.002, form="aspect", widths=(64, 128, 256, 512), depths=(2, 4, 8, 16),
                  tokens=(3e7, 3e9))
    sel = select_form(points, forms=("aspect", "chinchilla"), n_splits=5)
    assert sel.best == "aspect" and sel.supported
    assert sel.scores[0].mean_error < sel.scores[1].mean_error


def test_too_few_configurations_cannot_be_scored():
    points = draw(seed=0, seeds=3, widths=(64,), depths=(2,), tokens=(1e8,))
    with pytest.raises(UserError, match="1 distinct configuration"):
        held_out(points, form="liu")
    with pytest.raises(UserError, match="test_fraction=1.5 must lie in"):
        held_out(draw(seed=0), form="liu", test_fraction=1.5)
