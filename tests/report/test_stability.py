"""Verdict stability (decision accuracy of cheaper proxies) on hand-made results."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.report.stability import Stability, stability
from report_helpers import result

# three shapes of one scale, best to worst at the full horizon: L4-H48 < L2-H64 < L8-H32
FULL = {(2, 64): (3.00, 3.02), (4, 48): (2.90, 2.92), (8, 32): (3.20, 3.22)}


def _group(group, losses, *, tokens):
    return [result(n, d, list(v), group=group, tokens=tokens) for (n, d), v in losses.items()]


def _one(stab: Stability, proxy: str):
    (found,) = [a for a in stab.agreements if a.proxy == proxy]
    return found


def test_a_horizon_that_orders_every_pair_as_the_full_run_is_100_percent():
    half = {(2, 64): (3.50, 3.52), (4, 48): (3.40, 3.42), (8, 32): (3.70, 3.72)}
    stab = stability(_group("G", FULL, tokens=1000) + _group("G@0.5", half, tokens=500))
    a = _one(stab, "G@0.5")
    assert (a.ladder, a.kind, a.pairs, a.agree, a.accuracy) == ("G", "horizon", 3, 3, 1.0)
    assert a.fraction_of_target_compute == 0.5
    assert (a.low, a.high) == (1.0, 1.0)  # the gaps are far beyond the seed spread
    assert a.line == "G: the ranking at 0.5 of the tokens agrees with the full run on 3 of 3 pairs, 100% [100%, 100%]"
    assert a.matched == (("L2-H64-A4", "L2-H64-A4"), ("L4-H48-A3", "L4-H48-A3"), ("L8-H32-A2", "L8-H32-A2"))
    (ladder,) = stab.ladders
    assert (ladder.target, ladder.proxies) == ("G", ("G@0.5",))
    assert ladder.summary == ("G: the cheapest proxy ordering at least 80% of the pairs as the target is G@0.5 "
                              "(100% of 3 pairs at 50% of the target's compute)")
    assert stab.lines == (a.line, ladder.summary)
    d = stab.to_dict()
    assert d["agreements"][0]["accuracy"] == 1.0 and d["lines"] == list(stab.lines)


def test_one_flipped_pair_of_three_is_two_thirds():
    # at a quarter of the tokens L2-H64 and L8-H32 swap: L4-H48 < L8-H32 < L2-H64
    quarter = {(2, 64): (3.90, 3.92), (4, 48): (3.60, 3.62), (8, 32): (3.80, 3.82)}
    stab = stability(_group("G", FULL, tokens=1000) + _group("G@0.25", quarter, tokens=250))
    a = _one(stab, "G@0.25")
    assert (a.pairs, a.agree) == (3, 2)
    assert a.accuracy == pytest.approx(2 / 3)
    assert a.fraction_of_target_compute == 0.25
    assert a.line.startswith("G: the ranking at 0.25 of the tokens agrees with the full run on 2 of 3 pairs, 67%")
    assert "no proxy orders 80% of the pairs" in stab.ladders[0].summary


def test_the_interval_brackets_the_estimate_and_is_the_same_on_every_call():
    # one pair; at the proxy A's seeds (1, 3) average to B's (2, 2): a tie, counted as a disagreement.
    # A resample of A averages 1 (a quarter of draws: agrees), 2 (tie) or 3 (disagrees): the interval is [0, 1].
    target = [result(2, 64, [2.0, 2.01], group="G", tokens=1000), result(4, 48, [3.0, 3.01], group="G", tokens=1000)]
    proxy = [result(2, 64, [1.0, 3.0], group="G@0.5", tokens=500), result(4, 48, [2.0, 2.0], group="G@0.5", tokens=500)]
    a = _one(stability(target + proxy), "G@0.5")
    assert (a.pairs, a.agree, a.accuracy, a.low, a.high) == (1, 0, 0.0, 0.0, 1.0)
    assert a.line == "G: the ranking at 0.5 of the tokens agrees with the full run on 0 of 1 pair, 0% [0%, 100%]"
    # noisier three shapes: a real spread of resamples, bracketing the point estimate, reproducible
    noisy = {(2, 64): (3.00, 3.25), (4, 48): (3.10, 2.95), (8, 32): (3.05, 3.15)}
    rows = _group("G", FULL, tokens=1000) + _group("G@0.5", noisy, tokens=500)
    first, again = stability(rows, n_bootstrap=300), stability(rows, n_bootstrap=300)
    b = _one(first, "G@0.5")
    assert b == _one(again, "G@0.5")
    assert (b.pairs, b.agree) == (3, 2)
    assert b.low <= b.accuracy <= b.high and b.low < b.high
    assert (b.low, b.high) == (pytest.approx(1 / 3), 1.0)
    narrower = _one(stability(rows, n_bootstrap=300, level=0.5), "G@0.5")
    assert b.low <= narrower.low <= narrower.high <= b.high and narrower.line.endswith("(50% interval)")


def test_one_seed_per_shape_has_no_interval_and_says_so():
    one = {k: v[:1] for k, v in FULL.items()}
    half = {(2, 64): (3.5,), (4, 48): (3.4,), (8, 32): (3.7,)}
    a = _one(stability(_group("G", one, tokens=1000) + _group("G@0.5", half, tokens=500)), "G@0.5")
    assert (a.accuracy, a.low, a.high) == (1.0, None, None)
    assert a.line == ("G: the ranking at 0.5 of the tokens agrees with the full run on 3 of 3 pairs, 100% "
                      "(one seed per shape: no interval)")
    # a single one-seed shape is named
    mixed = _group("G", FULL, tokens=1000) + _group("G@0.5", {**{k: (v[0] + 0.5, v[1] + 0.5) for k, v in FULL.items()},
                                                               (8, 32): (3.7,)}, tokens=500)
    b = _one(stability(mixed), "G@0.5")
    assert b.low is None and "(L8-H32-A2 has one seed: no interval)" in b.line


def test_a_smaller_scale_is_matched_by_aspect_ratio_family():
    # target (P400): aspect ratios 64, 32, 16 and 4; the proxy (P100): 64, 32, 26.7 (family d/L~32 too), 16, 8
    target = [result(2, 128, [3.0, 3.01], group="P400", tokens=4000), result(4, 128, [2.9, 2.91], group="P400",
              tokens=4000), result(8, 128, [2.95, 2.96], group="P400", tokens=4000),
              result(32, 128, [3.3, 3.31], group="P400", tokens=4000)]
    proxy = [result(1, 64, [3.6, 3.61], group="P100", tokens=1000), result(2, 64, [3.5, 3.51], group="P100",
             tokens=1000), result(3, 80, [3.0, 3.01], group="P100", tokens=1000),
             result(4, 64, [3.4, 3.41], group="P100", tokens=1000), result(8, 64, [3.2, 3.21], group="P100", tokens=1000)]
    stab = stability(target + proxy)
    a = _one(stab, "P100")
    assert a.kind == "scale" and a.ladder == "P400"
    # L32-H128 (d/L 4) has no match; L4-H128 (32) takes L2-H64 (32), the nearer of the d/L~32 family
    assert a.matched == (("L2-H128-A8", "L1-H64-A4"), ("L4-H128-A8", "L2-H64-A4"), ("L8-H128-A8", "L4-H64-A4"))
    # target order L4 < L8 < L2; their matches at the proxy: L8's 3.4 < L4's 3.5 < L2's 3.6 - L4/L8 flip
    assert (a.pairs, a.agree) == (3, 2)
    compute = lambda rows: sum(r.tokens * r.train_flops_per_token for r in rows)  # noqa: E731
    assert a.fraction_of_target_compute == pytest.approx(compute(proxy[:2] + proxy[3:4]) / compute(target[:3]))
    assert a.line.startswith("P400: the ranking at P100 agrees with P400 on 2 of 3 pairs, 67% [")
    assert a.line.endswith("% of P400's compute")


def test_fewer_than_two_shapes_give_no_pairs():
    stab = stability([result(2, 64, [3.0, 3.1], group="G", tokens=1000),
                      result(2, 64, [3.4, 3.5], group="G@0.5", tokens=500)])
    a = _one(stab, "G@0.5")
    assert (a.pairs, a.agree, a.accuracy, a.low, a.high) == (0, 0, None, None, None)
    assert a.line == ("G: no pairs to compare the ranking at 0.5 of the tokens with the full run: fewer than 2 of its "
                      "shapes are in both")
    assert stab.ladders[0].summary == "G: no proxy has two comparable shapes"


def test_results_that_did_not_learn_are_left_out_and_named():
    half = {(2, 64): (3.50, 3.52), (4, 48): (3.40, 3.42), (8, 32): (3.70, 3.72)}
    rows = _group("G", FULL, tokens=1000) + _group("G@0.5", half, tokens=500)
    stab = stability(rows, learned=lambda r: not (r.group == "G" and r.shape_label == "L8-H32-A2"))
    a = _one(stab, "G@0.5")
    assert (a.pairs, a.agree) == (1, 1)
    assert stab.left_out == ("G/L8-H32-A2",)
    assert stab.notes == ("left out as not learned: G/L8-H32-A2",)
    nothing = stability(rows, learned=lambda r: False)
    assert (nothing.ladders, nothing.agreements, len(nothing.left_out)) == ((), (), 6)
    assert nothing.notes == ("no verdict stability: none of the 6 finished results learned (all left out)",)
    assert nothing.lines == nothing.notes


def test_a_lone_group_has_no_proxy_and_bad_settings_are_refused():
    stab = stability(_group("G", FULL, tokens=1000))
    assert stab.agreements == () and stab.notes[0].startswith("no verdict stability: G has no cheaper proxy")
    with pytest.raises(UserError, match="level"):
        stability([], level=1.5)
    with pytest.raises(UserError, match="n_bootstrap"):
        stability([], n_bootstrap=0)
