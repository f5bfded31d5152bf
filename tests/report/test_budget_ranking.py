"""The ranking against budget (`report.budgets`) on hand-made results: verdicts per budget, the budget at
which two shapes swap (interpolated in log tokens, with an interval, never outside the measured range), the
ranking at equal predicted time (interpolated between measured budgets only) and the short-budget warning."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from depthwidth.report.budgets import budget_ranking


@dataclass
class _Shape:
    n_layers: int


@dataclass
class _Result:
    group: str
    shape_label: str
    seed_losses: tuple
    tokens: int
    non_embedding_params: int = 10_000
    train_flops_per_token: float = 6e4
    shape: _Shape = field(default_factory=lambda: _Shape(2))


def ladder(a: list[float], b: list[float], *, tokens=(1000, 4000), spread=0.0, params=10_000):
    out = []
    for i, (la, lb) in enumerate(zip(a, b)):
        group = "G" if i == len(a) - 1 else f"G@{tokens[i] / tokens[-1]:g}"
        out.append(_Result(group, "L4-H32", (la - spread, la + spread), tokens[i], params, shape=_Shape(4)))
        out.append(_Result(group, "L1-H64", (lb - spread, lb + spread), tokens[i], params, shape=_Shape(1)))
    return out


def test_a_crossover_is_placed_in_log_tokens_between_the_two_budgets():
    ranking = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5]))
    (lad,) = ranking.ladders
    (c,) = lad.crossovers
    assert (c.a, c.b) == ("L1-H64", "L4-H32")  # the shallow shape ahead at the small budget, the deep one after
    assert c.tokens == pytest.approx(2000.0)  # d goes -0.2 -> +0.2: halfway in log(1000)..log(4000)
    assert c.low == c.high == pytest.approx(2000.0)  # one seed value repeated: no spread, no interval
    assert c.between == (1000, 4000)
    assert lad.verdicts[0].startswith("at 0.1 tokens/param (0.25 of the run): L1-H64 is best (3.0000), 0.200")
    assert "L4-H32 is best (2.3000), 0.200" in lad.verdicts[1]


def test_the_interval_widens_with_the_seed_spread_and_stays_in_the_bracket():
    (lad,) = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5], spread=0.05)).ladders
    (c,) = lad.crossovers
    sem = math.hypot(0.05, 0.05)  # per shape: stdev 0.0707 of two seeds / sqrt(2) = 0.05
    lo = math.exp(math.log(1000) + math.log(4) * (0.2 - sem) / 0.4)
    hi = math.exp(math.log(1000) + math.log(4) * (0.2 + sem) / 0.4)
    assert c.low == pytest.approx(lo) and c.high == pytest.approx(hi)
    assert 1000 <= c.low < c.tokens < c.high <= 4000
    assert c.resolved  # |d| = 0.2 > 2 x 0.0707 at both budgets
    (noisy,) = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5], spread=0.15)).ladders[0].crossovers
    assert not noisy.resolved  # |d| = 0.2 < 2 x 0.21: the swap may be seed noise


def test_no_crossover_when_the_order_holds_and_the_margin_is_judged_against_noise():
    (lad,) = budget_ranking(ladder([3.2, 2.6], [3.0, 2.59], spread=0.05)).ladders
    assert lad.crossovers == ()
    assert "not resolved" in lad.verdicts[1] and "not resolved" not in lad.verdicts[0]


def test_equal_time_interpolates_between_measured_budgets_only():
    seconds = {"L4-H32": 2.0, "L1-H64": 1.0}  # the deep shape is twice as slow per token

    def seconds_of(result, tokens):
        return seconds[result.shape_label] * tokens / 1000

    (lad,) = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5]), seconds_of=seconds_of).ladders
    at = {e["seconds"]: e for e in lad.equal_time}
    # at 4 s: the shallow shape is measured (its full run), the deep one interpolated halfway in log s (2..8)
    assert dict(at[4.0]["ranking"]) == pytest.approx({"L1-H64": 2.5, "L4-H32": 2.75})
    assert 1.0 not in at and 8.0 not in at  # each outside the other's measured range: never extrapolated
    assert at[2.0]["ranking"] == [("L1-H64", pytest.approx(2.75)), ("L4-H32", 3.2)]


def test_the_short_budget_warning_names_its_source_only_below_one_token_per_parameter():
    short = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5]))
    assert len(short.warnings) == 1 and "arXiv 2606.05186" in short.warnings[0]
    long = budget_ranking(ladder([3.2, 2.3], [3.0, 2.5], tokens=(20_000, 80_000)))
    assert long.warnings == ()


def test_a_study_without_horizons_has_no_ladder():
    results = [_Result("G", "L4-H32", (3.0,), 1000), _Result("G", "L1-H64", (3.1,), 1000)]
    assert budget_ranking(results).ladders == ()
