"""WSD schedules and cooldown branches (`TrainConfig.horizons`): a branch trained from the long run's
checkpoint is bit-identical, on CPU, to the standalone run of its length; a killed run with horizons resumes
to the results of one that ran through; the schedule follows its formulas."""

from __future__ import annotations

import math

import pytest

from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.schedule import cooldown_start, lr_at
from depthwidth.artifact.load import load_trained
from depthwidth.errors import UserError
from depthwidth.train import train
from depthwidth.train.horizons import branch_config, branch_dir


def wsd(**extra) -> TrainConfig:
    return TrainConfig(**{"steps": 20, "schedule": "wsd", "lr": 1.0, "min_lr": 0.1, "decay_fraction": 0.25,
                          "warmup": 2, **extra})


@pytest.mark.parametrize("shape, fall", [("linear", lambda p: p), ("1-sqrt", math.sqrt),
                                         ("cosine", lambda p: (1 - math.cos(math.pi * p)) / 2)])
def test_the_wsd_learning_rate_is_warmup_then_constant_then_its_cooldown(shape, fall):
    config = wsd(decay_shape=shape)
    lrs = [lr_at(config, s) for s in range(20)]
    assert lrs[:2] == [0.5, 1.0] and lrs[2:15] == [1.0] * 13 and cooldown_start(config) == 15
    for step in range(15, 20):
        assert lrs[step] == pytest.approx(1.0 - 0.9 * fall((step - 14) / 5), abs=1e-15)
    assert lrs[-1] == pytest.approx(0.1)


def test_a_shorter_wsd_run_has_the_same_stable_phase():
    long, short = wsd(steps=40), wsd(steps=20)
    assert [lr_at(long, s) for s in range(cooldown_start(short))] == \
        [lr_at(short, s) for s in range(cooldown_start(short))]


@pytest.mark.parametrize("extra, needle", [
    ({"schedule": "cosine", "decay_fraction": 0.2, "horizons": [0.5, 1.0]},
     "horizons=[0.5, 1.0] needs schedule='wsd' (it is 'cosine')"),
    ({"schedule": "cosine", "decay_fraction": 0.3}, "decay_fraction=0.3 needs schedule='wsd'"),
    ({"decay_fraction": 1.5}, "decay_fraction=1.5 must be in (0, 1]"),
    ({"decay_shape": "exp"}, "decay_shape='exp' is not allowed"),
    ({"horizons": [0.5]}, "must increase strictly within (0, 1] and end at 1"),
    ({"horizons": [0.5, 0.25, 1.0]}, "must increase strictly"),
    ({"horizons": ["a", 1.0]}, "must be a list of at most 16 fractions"),
    ({"horizons": [0.05, 1.0]}, "horizons: 0.05 of 20 steps is 1 steps, too short"),
    ({"warmup": 18, "decay_fraction": 0.2}, "do not fit in 20 steps"),
])
def test_bad_wsd_settings_are_one_line_naming_the_field(extra, needle):
    with pytest.raises(UserError) as err:
        wsd(**extra)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_horizons_read_from_json_lists_and_default_configs_keep_their_hash():
    config = wsd(horizons=[0.5, 1])
    assert config.horizons == (0.5, 1.0) and config.to_dict()["horizons"] == [0.5, 1.0]
    assert TrainConfig.from_dict(config.to_dict()) == config
    plain = TrainConfig(steps=10)
    assert plain.config_hash() == TrainConfig.from_dict({**plain.to_dict()}).config_hash()
    assert "horizons" not in __import__("depthwidth.artifact.config", fromlist=["x"]).identity_dict(plain)


@pytest.fixture
def run_config(tiny_config) -> TrainConfig:
    return tiny_config.with_(steps=16, schedule="wsd", decay_fraction=0.25, warmup=2, lr=3e-3, eval_every=0,
                             horizons=[0.5, 1.0])


def _losses(result) -> list[str]:
    return [c["loss"].hex() for c in result.curve]


def test_a_branch_equals_the_standalone_run_of_its_length(tiny_shape, run_config, tmp_path):
    full = train(tiny_shape, run_config, out_dir=tmp_path / "full")
    assert full.status == "completed" and [h["fraction"] for h in full.horizons] == [0.5, 1.0]
    half = branch_config(run_config, 0.5)
    assert half.steps == 8 and cooldown_start(half) == 6 and full.horizons[0]["branched_at"] == 6
    alone = train(tiny_shape, half, out_dir=tmp_path / "alone")
    branch = load_trained(branch_dir(tmp_path / "full", 0.5))
    assert branch.step == 8 and branch.finished and branch.config == half
    assert full.horizons[0]["val_loss"].hex() == alone.val_loss.hex()
    assert full.horizons[0]["steps"] == 8 and full.horizons[0]["tokens"] == alone.tokens
    branch_result = train(tiny_shape, half, out_dir=branch_dir(tmp_path / "full", 0.5), resume=True)
    assert _losses(branch_result) == _losses(alone) and branch_result.batch_stream_hash == alone.batch_stream_hash
    assert full.horizons[1]["val_loss"] == full.val_loss and full.horizons[1]["steps"] == 16
    # no run folder: the branches live in a temporary folder, with the same numbers
    again = train(tiny_shape, run_config)
    assert [h["val_loss"] for h in again.horizons] == [h["val_loss"] for h in full.horizons]


class Kill(Exception):
    pass


def _killer(at_steps: int, at_step: int):
    """A progress callback that stops the run of `at_steps` steps once it has done `at_step`."""
    fired = []

    def progress(p):
        if p.phase == "train" and p.steps == at_steps and p.step >= at_step and not fired:
            fired.append(p.step)
            raise Kill(p.step)

    return progress


@pytest.mark.parametrize("steps, step", [(16, 10), (8, 7)])  # in the full run after the branch point; in the branch
def test_a_killed_run_with_horizons_resumes_to_the_same_results(tiny_shape, run_config, tmp_path, steps, step):
    config = run_config.with_(checkpoint_every=2)
    through = train(tiny_shape, config, out_dir=tmp_path / "through")
    with pytest.raises(Kill):
        train(tiny_shape, config, out_dir=tmp_path / "killed", progress=_killer(steps, step))
    resumed = train(tiny_shape, config, out_dir=tmp_path / "killed", resume=True)
    assert _losses(resumed) == _losses(through) and resumed.val_loss == through.val_loss
    assert [(h["val_loss"], h["steps"], h["branched_at"]) for h in resumed.horizons] == \
        [(h["val_loss"], h["steps"], h["branched_at"]) for h in through.horizons]
    assert train(tiny_shape, config, out_dir=tmp_path / "killed", resume=True).horizons == resumed.horizons


def test_a_study_spec_takes_horizons_under_wsd_only_and_says_so_in_one_line(tmp_path):
    """A study trains horizons as cooldown branches (tests/study/test_horizon_study.py); without the WSD
    schedule there is no stable phase to branch from, and the spec says so naming the key."""
    from depthwidth.study.spec import load_spec

    spec = tmp_path / "hz.toml"
    spec.write_text('name = "hz"\n[[budget]]\nparams = 100000\n[lr]\ngrid = [1e-3]\n'
                    '[train]\ntokens = 100000\nschedule = "cosine"\nhorizons = [0.5, 1.0]\n')
    with pytest.raises(UserError) as err:
        load_spec(spec).train_config(lr=1e-3, seed=0, tokens=100000)
    assert "horizons" in str(err.value) and "wsd" in str(err.value) and "\n" not in str(err.value)
    spec.write_text(spec.read_text().replace('"cosine"', '"wsd"'))
    assert load_spec(spec).train_config(lr=1e-3, seed=0, tokens=100000).horizons == (0.5, 1.0)
