"""`[[budget]] parametrization = "sp"`: one budget of a study trains under its own parametrization (the same
family under SP beside CompleteP at one scale of a ladder); with a [train] factor it is refused in one line."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.study.expand import DataInfo, expand
from depthwidth.study.spec import parse_spec

SPEC = """
name = "p"
seeds = [0]
[data]
corpus = "shakespeare"
seq_len = 32
batch_size = 8
[[budget]]
label = "cp"
params = 30000
depths = [1, 2]
tolerance = 0.3
[[budget]]
label = "sp"
params = 30000
depths = [1, 2]
tolerance = 0.3
parametrization = "sp"
[train]
steps = 10
parametrization = {train}
[lr]
grid = [1e-3, 3e-3]
[bench]
enabled = false
"""
DATA = DataInfo(corpus_hash="x", vocab_size=256, train_tokens=10**6)


def test_a_budget_trains_under_its_own_parametrization():
    expansion = expand(parse_spec(SPEC.format(train='"completep"')), data=DATA)
    by_group = {}
    for r in expansion.train_runs:
        by_group.setdefault(r.group, set()).add(r.config["train"].get("parametrization", "sp"))
    assert by_group == {"cp": {"completep"}, "sp": {"sp"}}
    assert expansion.groups[1].overrides == {"parametrization": "sp"}
    # the same shapes, lrs and seeds: different runs only by their parametrization
    assert len({r.run_id for r in expansion.train_runs}) == len(expansion.train_runs) == 8


def test_with_a_factor_it_is_one_line_naming_the_key():
    with pytest.raises(UserError) as err:
        expand(parse_spec(SPEC.format(train='["sp", "completep"]')), data=DATA)
    assert "budget[1].parametrization" in str(err.value) and "\n" not in str(err.value)
