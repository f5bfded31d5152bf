"""`[lr] verify`: extra learning rates around a transferred one at the largest scale's shallowest and deepest
shape (`depthwidth.study.verify`). The study with them runs in test_transfer_across_scales.py (they change none
of its other runs, choices or fairness); here the spec's checks, the multipliers and the verdict."""

from __future__ import annotations

import pytest

from depthwidth.study.schema import SpecError
from depthwidth.study.spec import load_spec, parse_spec
from depthwidth.study.verify import factors, verdict, verify_config

from test_transfer_across_scales import SPEC


def _write(tmp_path, corpus, extra: str = "", name: str = "v.toml"):
    path = tmp_path / name
    path.write_text(SPEC.format(corpus=corpus).replace('transfer_seeds = 1\n', f'transfer_seeds = 1\n{extra}'))
    return path


def test_verify_spec_errors(tiny_corpus, tmp_path):
    with pytest.raises(SpecError, match="verify=3: give 0, 2 or 4"):
        load_spec(_write(tmp_path, tiny_corpus, "verify = 3\n"))
    text = SPEC.format(corpus=tiny_corpus).replace('transfer_from = "L1-H40-A5"\ntransfer_seeds = 1\n', "verify = 2\n")
    with pytest.raises(SpecError, match="verify checks a transferred learning rate: it needs transfer_from"):
        parse_spec(text)


def test_verify_factors_config_and_verdict():
    assert factors(2, 2.0) == (0.5, 2.0) and factors(4, 2.0) == (0.25, 0.5, 2.0, 4.0) and factors(0, 2.0) == ()
    config = {"kind": "train", "train": {"lr": 0.02, "horizons": [0.5, 1.0]}}
    out = verify_config(config, of_lr=0.01, factor=2.0)
    assert out == {"kind": "train", "train": {"lr": 0.02}, "verify": {"of_lr": 0.01, "factor": 2.0}}
    assert config["train"]["horizons"] == [0.5, 1.0]  # the input is not changed
    # two seeds each: se = sqrt(mean(var) * (1/2 + 1/2)); var of (3.0, 3.02) = 0.0002 -> se = 0.01414
    assert verdict(0.01, [3.0, 3.02], {0.02: [2.90, 2.92]}).startswith("the optimum moved: LR 0.02 (higher) is 0.100")
    assert "within 2 standard errors (0.014)" in verdict(0.01, [3.0, 3.02], {0.005: [2.99, 3.01]})
    assert verdict(0.01, [3.0, 3.02], {0.005: [3.1, 3.2]}) == "the transferred LR 0.01 is the best of those tried"
    assert "one seed, so not resolved" in verdict(0.01, [3.0], {0.02: [2.9]})
    assert verdict(0.01, [3.0], {0.02: [None]}) == "verification runs not finished"
