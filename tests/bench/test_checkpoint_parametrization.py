"""A checkpoint trained under muP/CompleteP is rebuilt with its forward multipliers, so the benchmark (and
the int8 loss comparison) sees the model that was trained, not an SP model with the same weights."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.bench.quant_report import EvalData, validation_loss
from depthwidth.artifact.load import load_trained
from depthwidth.bench.target import load_checkpoint_model
from depthwidth.errors import UserError
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.shape import Shape
from depthwidth.train import TrainConfig, train
from depthwidth.artifact.model import run_multipliers

SHAPE = Shape(n_layers=4, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)


@pytest.fixture(scope="module")
def completep_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cp")
    config = TrainConfig(corpus="python-docs", seq_len=32, batch_size=4, steps=3, lr=1e-2, eval_windows=4,
                         parametrization="completep", base_width=16, base_depth=2, threads=1,
                         cache_dir=str(tmp_path_factory.mktemp("cache")))
    result = train(SHAPE, config, out_dir=out)
    assert result.status == "completed"
    return out, config, result


def test_the_rebuilt_model_has_the_runs_multipliers_and_its_validation_loss(completep_run):
    out, config, result = completep_run
    loaded = load_checkpoint_model(out)
    assert loaded.model.scaling == run_multipliers(SHAPE, config)
    assert loaded.model.scaling.residual_mult == pytest.approx(0.5)  # m_L = 4/2, alpha = 1
    assert loaded.model.scaling.logit_mult == pytest.approx(0.5)  # m_N = 32/16
    assert validation_loss(loaded.model, EvalData(loaded.config, dataset_hash=loaded.meta.dataset_hash)) == pytest.approx(result.val_loss, rel=1e-6)
    sp = Transformer(SHAPE).eval()  # the same weights without the multipliers compute something else
    sp.load_state_dict(loaded.model.state_dict())
    assert abs(validation_loss(sp, EvalData(loaded.config, dataset_hash=loaded.meta.dataset_hash)) - result.val_loss) > 1e-3
    idx = torch.arange(16).reshape(1, 16)
    assert not torch.allclose(sp(idx)[0], loaded.model(idx)[0])


def _with_config(out, tmp_path, config: dict | None):
    """A copy of the run's checkpoint whose meta records `config` (None: no config at all)."""
    payload = torch.load(out / CHECKPOINT, weights_only=True)
    meta = json.loads(payload["meta"])
    if config is None:
        meta.pop("config")
    else:
        meta["config"] = config
    payload["meta"] = json.dumps(meta)
    path = tmp_path / "c.pt"
    torch.save(payload, path)
    return path


def test_a_checkpoint_that_records_no_config_is_rebuilt_with_the_default_forward(completep_run, tmp_path):
    out, config, _ = completep_run
    run = load_trained(_with_config(out, tmp_path, None))
    assert run.config is None and run.multipliers.parametrization == "sp" and run.model.scaling.residual_mult == 1.0


@pytest.mark.parametrize("change, needle", [
    ({"parametrization": "nope"}, "parametrization='nope'"),
    ({"base_width": "16"}, "base_width='16'"),
    ({"base_depth": 0}, "base_depth=0"),
    ({"steps": None}, "give exactly one of steps and tokens"),
])
def test_a_bad_recorded_config_is_one_line_naming_the_checkpoint(completep_run, tmp_path, change, needle):
    out, config, _ = completep_run
    path = _with_config(out, tmp_path, {**config.to_dict(), **change})
    with pytest.raises(UserError, match="checkpoint .*c.pt") as err:
        load_trained(path)
    assert needle in str(err.value) and "\n" not in str(err.value)
