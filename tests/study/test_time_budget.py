"""Equal-time budgets: each member of a params family trains for the same predicted time on named hardware,
so a deeper (slower) shape gets fewer tokens; the prediction is part of the run's identity and the fairness
check compares the time instead of the tokens."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.shapes.latency import predict_train_step
from depthwidth.study import Store, run_study
from depthwidth.study.expand import expand
from depthwidth.study.fairness import check_fairness
from depthwidth.study.spec import parse_spec

SPEC = """
name = "it"
hardware = "cpu"
seeds = [0]
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8
[[budget]]
label = "time"
params = 30000
depths = [1, 4]
tolerance = 0.3
{time}
[train]
steps = 12
{train}
[lr]
grid = [3e-3]
[eval]
every = 4
windows = 2
[bench]
enabled = false
[execution]
threads = 1
"""


def spec(corpus, *, time='seconds = 0.005\nhardware = "h100"', train=""):
    return parse_spec(SPEC.format(corpus=corpus, time=time, train=train))


def test_each_shape_gets_the_whole_steps_of_its_predicted_step_time(tiny_corpus):
    expansion = expand(spec(tiny_corpus))
    (group,) = expansion.groups
    tokens = {}
    for shape in group.shapes:
        step = predict_train_step(shape, hardware="h100", seq_len=32, global_batch=8, micro_batch=8, dtype="fp32",
                                  execution="eager").total_s
        share = group.shares[shape.label()]
        assert share.steps == int(0.005 // step) and share.tokens == share.steps * 256
        assert share.source == "table h100-sxm" and share.seconds == 0.005
        tokens[shape.n_layers] = share.tokens
    assert tokens[4] < tokens[1]  # the deeper shape is slower per token, so it sees fewer tokens
    for run in expansion.train_runs:
        assert run.config["train"]["tokens"] == group.shares[run.shape.label()].tokens
        assert run.config["budget"]["hardware"] == "h100"
    assert [r.run_id for r in expand(spec(tiny_corpus)).train_runs] == [r.run_id for r in expansion.train_runs]


def test_gpu_hours_are_seconds_and_the_label_names_the_time(tiny_corpus):
    a = expand(spec(tiny_corpus, time='gpu_hours = 2.0\nhardware = "h100"'))
    b = expand(spec(tiny_corpus, time='seconds = 7200.0\nhardware = "h100"'))
    assert [g.shares for g in a.groups] == [g.shares for g in b.groups]
    unlabelled = SPEC.replace('label = "time"\n', "")
    assert expand(parse_spec(unlabelled.format(corpus=tiny_corpus, time="seconds = 7200", train=""))).groups[0].label \
        == "N30K-2h"


@pytest.mark.parametrize("time, key, words", [
    ('seconds = 1\ngpu_hours = 1', "budget[0]", "seconds or gpu_hours, not both"),
    ('hardware = "h100"', "budget[0]", "give seconds or gpu_hours with it"),
    ('seconds = 1\nhardware = "no-such-gpu"', "budget[0].hardware", "no-such-gpu"),
    ('seconds = -1', "budget[0].seconds", "expected a number"),
])
def test_a_bad_time_budget_is_one_line_naming_the_key(tiny_corpus, time, key, words):
    with pytest.raises(UserError) as err:
        expand(spec(tiny_corpus, time=time))
    message = str(err.value)
    assert f"{key}" in message and words in message and "\n" not in message


def test_horizons_of_an_equal_time_group_are_fractions_of_its_time(tiny_corpus):
    expansion = expand(spec(tiny_corpus, train='schedule = "wsd"\nhorizons = [0.5, 1.0]'))
    full, half = expansion.groups
    assert half.label == "time@0.5"
    for label, share in full.shares.items():
        assert half.shares[label].seconds == pytest.approx(share.seconds / 2)
        assert half.shares[label].steps == max(1, round(share.steps / 2))
    for run in expansion.train_runs:
        if run.parent is not None:
            assert run.config["budget"] == half.shares[run.shape.label()].to_dict()
            assert run.config["train"]["tokens"] == half.shares[run.shape.label()].tokens


def test_an_equal_time_study_is_fair_and_a_changed_time_is_caught(tiny_corpus, tmp_path):
    path = tmp_path / "it.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus, time='seconds = 0.005\nhardware = "h100"', train=""))
    run_study(path, study_dir=tmp_path / "it")
    with Store.open(tmp_path / "it") as store:
        runs, results = store.runs(), {r.run_id: r for r in store.results()}
    assert {results[r.run_id].tokens for r in runs} == {r.config["budget"]["tokens"] for r in runs}
    assert len({r.config["budget"]["tokens"] for r in runs}) == 2
    assert check_fairness(runs, results).fair
    from dataclasses import replace

    tampered = [replace(runs[0], config=runs[0].config | {"budget": runs[0].config["budget"] | {"seconds": 1.0}})]
    report = check_fairness(tampered + runs[1:], results)
    assert not report.fair and report.fields == ("time",)
