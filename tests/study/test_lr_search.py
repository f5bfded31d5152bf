"""The bracket search on synthetic loss-against-LR curves: it extends the grid towards the optimum in both
directions, refines inside, stops at the shared budget (not bracketed there), and is a function of the
finished trials alone."""

from __future__ import annotations

import math

import pytest

from depthwidth.study.lr_search import (
    SearchPlan,
    assess,
    default_step,
    group_mode,
    next_lr,
    parabola_vertex,
    transfer_seeds,
)


def bowl(optimum: float, curvature: float = 0.5, floor: float = 3.0):
    """A loss exactly quadratic in log LR with its minimum at `optimum`."""
    return lambda lr: floor + curvature * math.log(lr / optimum) ** 2


def search(plan: SearchPlan, loss) -> dict[float, float]:
    tried: dict[float, float] = {}
    while (lr := next_lr(plan, tried)) is not None:
        assert lr not in tried
        tried[lr] = loss(lr)
    return tried


def test_extends_upwards_until_the_best_is_inside_then_refines_to_the_optimum():
    plan = SearchPlan(initial=(1e-4, 2e-4, 4e-4), max_trials=9, step=2.0)
    tried = search(plan, bowl(5e-3))
    # three starting points, then one step of 2x beyond the top edge at a time until 1.28e-2 is worse
    # than 6.4e-3, then the parabola through 3.2e-3, 6.4e-3, 1.28e-2 (exact for this curve): 5e-3
    assert list(tried) == [1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3, 3.2e-3, 6.4e-3, 1.28e-2, 5e-3]
    a = assess(tried)
    assert (a.best_lr, a.bracketed, a.edge) == (5e-3, True, None)
    assert a.optimum_lr == pytest.approx(5e-3, rel=1e-3)


def test_extends_downwards_when_the_lowest_is_best():
    plan = SearchPlan(initial=(1e-3, 2e-3, 4e-3), max_trials=7, step=2.0)
    tried = search(plan, bowl(1.7e-4))
    # 1.25e-4 is still the lowest and best (closer to 1.7e-4 in log LR than 2.5e-4): one more step down
    assert list(tried) == [1e-3, 2e-3, 4e-3, 5e-4, 2.5e-4, 1.25e-4, 6.25e-5]
    a = assess(tried)
    assert (a.best_lr, a.bracketed, a.edge) == (1.25e-4, True, None)
    assert a.optimum_lr == pytest.approx(1.7e-4, rel=2e-3)


def test_refinement_inside_the_grid_vertex_then_the_wider_gap():
    plan = SearchPlan(initial=(1e-3, 2e-3, 4e-3), max_trials=6, step=2.0)
    tried = search(plan, bowl(2.5e-3))
    # vertex of the exact parabola, then (the vertex again being tried) the geometric midpoint of the
    # wider gap next to the best, 2.5e-3..4e-3, then again the wider one, now 2.5e-3..3.162e-3
    assert list(tried) == [1e-3, 2e-3, 4e-3, 2.5e-3, 3.162e-3, 2.812e-3]
    assert assess(tried).best_lr == 2.5e-3 and len(tried) == plan.max_trials


def test_budget_exhausted_before_the_optimum_is_bracketed():
    plan = SearchPlan(initial=(1e-4, 2e-4), max_trials=5, step=2.0)
    tried = search(plan, bowl(1.0))
    assert list(tried) == [1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3]
    a = assess(tried)
    assert (a.best_lr, a.bracketed, a.edge, a.optimum_lr) == (1.6e-3, False, "high", None)


def test_diverged_trials_push_the_search_down():
    plan = SearchPlan(initial=(1e-2, 2e-2), max_trials=5, step=2.0)
    loss = lambda lr: math.inf if lr > 6e-3 else bowl(2e-3)(lr)  # noqa: E731
    tried = search(plan, loss)
    assert list(tried) == [1e-2, 2e-2, 5e-3, 2.5e-3, 1.25e-3]
    a = assess(tried)
    assert (a.best_lr, a.bracketed) == (2.5e-3, True) and a.optimum_lr == pytest.approx(2e-3, rel=1e-3)


def test_deterministic_given_the_same_finished_trials_in_any_order():
    plan = SearchPlan(initial=(1e-3, 3e-3, 9e-3), max_trials=8, step=3.0)
    loss = bowl(4e-2, curvature=0.3)
    tried = search(plan, loss)
    # a resumed study sees the same finished trials (as a dict built in another order): the same next step
    for k in range(3, len(tried)):
        seen = dict(list(tried.items())[:k])
        shuffled = dict(reversed(list(seen.items())))
        assert next_lr(plan, seen) == next_lr(plan, shuffled) == list(tried)[k]
    assert next_lr(plan, tried) is None


def test_a_step_that_rounds_to_a_tried_value_or_leaves_the_range_ends_the_search():
    # 1e-3 / 1.0000001 rounds to 1e-3 again: the search stops instead of proposing it forever
    assert next_lr(SearchPlan(initial=(1e-3,), max_trials=5, step=1.0000001), {1e-3: 3.0}) is None
    huge = SearchPlan(initial=(1e-3,), max_trials=5, step=1e300)
    assert next_lr(huge, {1e-3: 3.0}) is None  # 1e-303 is below LR_RANGE
    assert assess({1e-3: 3.0}).bracketed is False


def test_parabola_vertex_and_default_step():
    assert parabola_vertex([(0.0, 1.0), (1.0, 0.0), (2.0, 1.0)]) == pytest.approx(1.0)
    assert parabola_vertex([(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)]) is None  # collinear
    assert parabola_vertex([(0.0, 0.0), (1.0, 1.0), (2.0, 0.0)]) is None  # opens downwards
    assert default_step((1e-3, 4e-3, 1.6e-2)) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="max_trials=2"):
        SearchPlan(initial=(1e-3, 2e-3, 4e-3), max_trials=2, step=2.0)


class _LR:  # stands in for the spec's LRSpec
    search = "bracket"
    max_trials = 5
    trials = 3
    transfer_from = "L2-H64-A8"
    transfer_seeds = None


def test_group_modes():
    shapes = {"L2-H64-A8": 100, "L4-H48-A6": 90}
    sp = group_mode(_LR(), seeds=(0, 1), parametrization="sp", shapes=shapes)
    assert (sp.kind, sp.max_trials, sp.final_seeds) == ("bracket", 5, (0, 1))
    cp = group_mode(_LR(), seeds=(1, 0), parametrization="completep", shapes=shapes)
    # the saved trials are spent on seeds: 5 trials x 2 seeds -> 10 seeds at the transferred LR
    assert (cp.kind, cp.proxy, cp.seeds, cp.final_seeds) == ("transfer", "L2-H64-A8", (0, 1), tuple(range(10)))
    assert transfer_seeds((3, 5), 4) == (3, 5, 6, 7)
    lr = _LR()
    lr.transfer_from = "smallest"
    assert group_mode(lr, seeds=(0,), parametrization="mup", shapes=shapes).proxy == "L4-H48-A6"
