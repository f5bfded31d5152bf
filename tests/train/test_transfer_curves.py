"""The transfer sweep's bookkeeping on hand-made curves: best index, edges, the parabola's vertex in log LR,
and how many grid steps the optimum moves across a sweep."""

from __future__ import annotations

import itertools
import math

import pytest

from depthwidth.errors import UserError
from depthwidth.train.transfer import TransferCurve, TransferResult, log_grid

LRS = log_grid(1e-3, 1.28e-1, 8)  # a factor 2 per grid step


def curve(width, depth, losses, pz="sp"):
    return TransferCurve(parametrization=pz, width=width, depth=depth, lrs=LRS, losses=tuple(losses))


def test_log_grid_is_geometric_and_refuses_bad_bounds():
    assert LRS[0] == 1e-3 and LRS[-1] == pytest.approx(0.128)
    assert all(b / a == pytest.approx(2.0) for a, b in itertools.pairwise(LRS))
    with pytest.raises(UserError, match="--lr-min"):
        log_grid(1e-2, 1e-3, 4)


def test_parabola_vertex_between_grid_points():
    # losses = (i - 3.25)^2 + 1 sampled at i = 0..7: the vertex of any three neighbours is 3.25 exactly
    c = curve(64, 2, [(i - 3.25) ** 2 + 1 for i in range(8)])
    assert c.best_index == 3 and c.best_lr == LRS[3] and not c.at_edge
    assert c.interpolated_index() == pytest.approx(3.25)


def test_diverged_runs_and_edges():
    c = curve(64, 2, [3.0, 2.9, 2.8, 2.7, 2.6, 2.5, math.inf, math.inf])
    assert c.best_index == 5 and c.interpolated_index() == 5.0  # beside a diverged run: no parabola
    edge = curve(64, 2, [2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7])
    assert edge.at_edge and edge.interpolated_index() == 0.0
    assert curve(64, 2, [math.inf] * 8).best_index is None


def test_shift_counts_grid_steps_over_width_and_depth():
    widths, depths = (64, 128, 256), (2, 4)
    curves = (curve(64, 2, [(i - 5) ** 2 for i in range(8)]), curve(128, 2, [(i - 4) ** 2 for i in range(8)]),
              curve(256, 2, [(i - 2.5) ** 2 for i in range(8)]), curve(64, 4, [(i - 5) ** 2 for i in range(8)]))
    r = TransferResult(curves=curves, widths=widths, depths=depths, lrs=LRS)
    width = r.shift("sp", "width")
    assert width["best_index"] == [5, 4, 2]  # (i - 2.5)^2 ties at 2 and 3: the first wins
    assert width["grid_steps"] == 3 and width["signed_grid_steps"] == -3
    assert width["interpolated_steps"] == pytest.approx(2.5)
    depth = r.shift("sp", "depth")
    assert depth["grid_steps"] == 0 and depth["edges"] == []
    assert r.to_dict()["shift"]["sp"]["width"]["grid_steps"] == 3
