"""A checkpoint trained under muP/CompleteP is rebuilt with its forward multipliers, so the benchmark (and
the int8 loss comparison) sees the model that was trained, not an SP model with the same weights."""

from __future__ import annotations

import pytest
import torch

from depthwidth.bench.quant_report import EvalData, validation_loss
from depthwidth.bench.target import load_checkpoint_model, trained_scaling
from depthwidth.errors import UserError
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.shape import Shape
from depthwidth.train import TrainConfig, train
from depthwidth.train.optim import run_multipliers

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
    assert validation_loss(loaded.model, EvalData(loaded.meta)) == pytest.approx(result.val_loss, rel=1e-6)
    sp = Transformer(SHAPE).eval()  # the same weights without the multipliers compute something else
    sp.load_state_dict(loaded.model.state_dict())
    assert abs(validation_loss(sp, EvalData(loaded.meta)) - result.val_loss) > 1e-3
    idx = torch.arange(16).reshape(1, 16)
    assert not torch.allclose(sp(idx)[0], loaded.model(idx)[0])


def test_a_checkpoint_without_a_parametrization_is_sp():
    assert trained_scaling({"config": {"lr": 1e-3}}, SHAPE, source="x").parametrization == "sp"
    assert trained_scaling({}, SHAPE, source="x").residual_mult == 1.0


@pytest.mark.parametrize("config, needle", [
    ({"parametrization": "nope"}, "parametrization='nope'"),
    ({"parametrization": "completep", "base_width": "16"}, "base_width='16'"),
    ({"parametrization": "mup", "base_depth": 0}, "base_depth=0"),
])
def test_a_bad_recorded_parametrization_is_one_line_naming_the_checkpoint(config, needle):
    with pytest.raises(UserError, match="checkpoint c.pt") as err:
        trained_scaling({"config": config}, SHAPE, source="checkpoint c.pt")
    assert needle in str(err.value) and "\n" not in str(err.value)
