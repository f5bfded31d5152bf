"""`load_trained`: the one loader of a trained run. It rebuilds the model with the trainer's own builder
from the recorded `TrainConfig`, so a reader (bench, hf export, a study's export) gets the trained forward
pass without re-typing any default, and a new forward-affecting setting reaches every reader untouched."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from depthwidth.artifact import load as load_module
from depthwidth.artifact import model as model_module
from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.artifact.load import load_trained
from depthwidth.artifact.records import CheckpointMeta, CurvePoint, EvalPoint
from depthwidth.bench.quant_report import EvalData, validation_loss
from depthwidth.bench.target import load_target
from depthwidth.errors import UserError
from depthwidth.shapes.shape import Shape
from depthwidth.train import train

SHAPE = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
#: the keys a checkpoint's meta has always had, in order (a resume and older readers rely on them)
META_KEYS = ["step", "curve", "evals", "train_seconds", "eval_seconds", "saved_activation_bytes", "state_bytes",
             "config", "shape", "dataset_hash", "init_sha256", "resumes", "final"]  # "final": the run's last checkpoint


def _config(tmp_path, cls=TrainConfig, **extra) -> TrainConfig:
    return cls(corpus="python-docs", seq_len=32, batch_size=4, steps=3, lr=3e-3, eval_windows=4, threads=1,
               cache_dir=str(tmp_path / "cache"), **extra)


@pytest.fixture(scope="module")
def sp_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sp")
    config = _config(tmp, eval_every=2)
    result = train(SHAPE, config, out_dir=tmp / "run")
    assert result.status == "completed"
    return tmp / "run", config, result


def test_a_run_folder_is_rebuilt_with_its_config_meta_and_validation_loss(sp_run):
    out, config, result = sp_run
    run = load_trained(out)
    assert run.config == config and run.shape == SHAPE and run.step == 3 and run.finished
    assert run.checkpoint == out / CHECKPOINT and run.folder == out and not run.model.training
    assert run.multipliers.is_sp and run.model.scaling == run.multipliers
    assert [CurvePoint.from_dict(c).step for c in run.meta.curve] == [0, 1, 2]
    assert [EvalPoint.from_dict(e).step for e in run.meta.evals] == [2, 3]
    assert validation_loss(run.model, EvalData(run.config, dataset_hash=run.meta.dataset_hash)) == \
        pytest.approx(result.val_loss, rel=1e-6)
    assert load_trained(out / CHECKPOINT).config == config  # the file itself, too


def test_the_checkpoint_meta_keeps_its_keys_and_reads_back_typed(sp_run):
    out, _, _ = sp_run
    raw = json.loads(torch.load(out / CHECKPOINT, weights_only=True)["meta"])
    assert list(raw) == META_KEYS
    meta = CheckpointMeta.from_dict(raw)
    assert meta.to_dict() == raw and meta.step == 3 and meta.resumes == []
    curve = CurvePoint.from_dict(raw["curve"][0])
    assert curve.to_dict() == raw["curve"][0] and curve.warmup  # the first steps of a process are warm-up


@pytest.mark.parametrize("record, data, needle", [
    (CheckpointMeta, {"step": "3"}, "step='3' is str, expected int"),
    (CheckpointMeta, {"curve": []}, "missing 1 required keyword-only argument: 'step'"),
    (CheckpointMeta, [1, 2], "its meta is list, expected a JSON object"),
    (CurvePoint, {"step": 0, "loss": 1.0}, "missing 5 required keyword-only arguments"),
    (CurvePoint, {"step": 0, "loss": 1.0, "lr": 1, "grad_norm": 1, "seconds": 1, "cpu_seconds": 1,
                  "tokens_per_s": 1, "color": "red"}, "unknown key(s) color"),
    (EvalPoint, {"step": 1, "tokens": 2, "val_loss": True, "val_loss_by_slice": {}}, "val_loss=True is bool"),
])
def test_a_malformed_record_is_one_line_naming_its_source(record, data, needle):
    with pytest.raises(UserError) as err:
        record.from_dict(data, source="checkpoint c.pt")
    assert str(err.value).startswith("checkpoint c.pt: ") and needle in str(err.value), err.value
    assert "\n" not in str(err.value)


def test_a_new_forward_setting_reaches_every_reader_with_no_edit_there(tmp_path, monkeypatch):
    """A setting added to TrainConfig that changes the forward pass (here a logit scale) is taught to the
    owner - the config and `artifact.model` - only; the trainer, `load_trained` and the benchmark's loader
    then rebuild the model that was trained."""
    NewConfig = dataclasses.make_dataclass(
        "TrainConfig", [("logit_scale", float, dataclasses.field(default=1.0))], bases=(TrainConfig,), frozen=True,
        kw_only=True, slots=True)
    original = model_module.run_multipliers

    def with_logit_scale(shape, config):
        m = original(shape, config)
        return dataclasses.replace(m, logit_mult=m.logit_mult * getattr(config, "logit_scale", 1.0))

    monkeypatch.setattr(model_module, "run_multipliers", with_logit_scale)  # the builder's one place
    monkeypatch.setattr(load_module, "TrainConfig", NewConfig)  # the owner's class, as if the field were added
    config = _config(tmp_path, cls=NewConfig, logit_scale=0.25)
    result = train(SHAPE, config, out_dir=tmp_path / "run")
    assert result.status == "completed" and result.config["logit_scale"] == 0.25

    run = load_trained(tmp_path / "run")
    assert run.config == config and run.multipliers.logit_mult == pytest.approx(0.25)
    bench = load_target(tmp_path / "run")  # the benchmark's reader, unchanged
    assert bench.model.scaling.logit_mult == pytest.approx(0.25)
    data = EvalData(run.config, dataset_hash=run.meta.dataset_hash)
    assert validation_loss(bench.model, data) == pytest.approx(result.val_loss, rel=1e-6)
    monkeypatch.setattr(model_module, "run_multipliers", original)  # a reader that forgot the setting differs
    assert abs(validation_loss(load_trained(tmp_path / "run").model, data) - result.val_loss) > 1e-3
