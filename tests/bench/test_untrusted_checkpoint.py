"""A checkpoint is an untrusted file: its recorded shape is checked against sane bounds and against its
own weight tensors before any module is built, and whatever is wrong with it is one line."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth.bench import target as target_module
from depthwidth.bench.target import load_checkpoint_model
from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.checkpoint import CHECKPOINT_FORMAT

SHAPE = Shape(n_layers=2, d_model=16, n_heads=2, vocab_size=32, max_seq_len=16)


def write_checkpoint(path, *, shape: dict, state: dict | None = None, meta_extra: dict | None = None) -> None:
    """A file laid out as `save_checkpoint` writes one, with `shape` as its recorded shape and `state`
    (default: the real weights of SHAPE) as its model."""
    state = Transformer(SHAPE).state_dict() if state is None else state
    meta = {"step": 1, "shape": shape, **(meta_extra or {})}
    torch.save({"format": CHECKPOINT_FORMAT, "model": state, "optimizer": {}, "rng": {"cpu": torch.get_rng_state()},
                "meta": json.dumps(meta)}, path)


@pytest.fixture
def no_model_built(monkeypatch):
    """Fail the test if a Transformer is built at all."""
    def refuse(*args, **kwargs):
        raise AssertionError("a module was built from an untrusted shape")

    monkeypatch.setattr(target_module, "Transformer", refuse)


def test_a_checkpoint_claiming_10_12_layers_is_refused_before_building(tmp_path, no_model_built):
    path = tmp_path / "huge.pt"
    write_checkpoint(path, shape={**SHAPE.to_dict(), "n_layers": 10**12})
    with pytest.raises(UserError, match=r"invalid shape: n_layers=1000000000000 is above the limit of 16,384"):
        load_checkpoint_model(path)


def test_a_shape_within_bounds_but_not_its_weights_is_refused_before_building(tmp_path, no_model_built):
    path = tmp_path / "wide.pt"  # d_model 65536 would be a 48 GiB model; its weights are those of d_model 16
    write_checkpoint(path, shape={**SHAPE.to_dict(), "d_model": 65536, "n_heads": 512, "head_dim": None,
                                  "n_kv_heads": None, "d_ff": None})
    with pytest.raises(UserError, match=r"weights do not fit its shape L2-H65536-A512: embed.weight is \(32, 16\), "
                                        r"expected a float tensor of \(32, 65536\)"):
        load_checkpoint_model(path)
    deep = tmp_path / "deep.pt"  # 16000 layers claimed, 2 stored
    write_checkpoint(deep, shape={**SHAPE.to_dict(), "n_layers": 16000})
    with pytest.raises(UserError, match=r"lacks 'blocks.2.norm1.weight' \(96003 tensors expected\)"):
        load_checkpoint_model(deep)


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("final_norm.weight"), "lacks 'final_norm.weight'"),
    (lambda s: s.update({"extra.weight": torch.zeros(2)}), "has 'extra.weight', which it does not have"),
    (lambda s: s.update({"embed.weight": torch.zeros(32, 16, dtype=torch.int64)}), "embed.weight is (32, 16), "
                                                                                     "expected a float tensor"),
    (lambda s: s.update({"embed.weight": [1, 2, 3]}), "embed.weight is list"),
])
def test_weights_that_do_not_fit_are_one_line(tmp_path, capsys, change, message):
    state = Transformer(SHAPE).state_dict()
    change(state)
    path = tmp_path / "bad.pt"
    write_checkpoint(path, shape=SHAPE.to_dict(), state=state)
    assert main(["bench", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_pickle_checkpoint_is_one_line_without_advice_to_trust_it(tmp_path, capsys):
    path = tmp_path / "evil.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "payload": print}, path)  # a global: weights_only refuses it
    assert main(["bench", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "holds Python objects that a weights-only load refuses (Unsupported global: GLOBAL print was not an " \
           "allowed global by default); depthwidth never runs code from a checkpoint" in err
    assert "weights_only=False" not in err and "Re-running" not in err


@pytest.mark.parametrize("meta", ["{not json", json.dumps([1, 2]), "9" * 5000])
def test_malformed_meta_is_one_line(tmp_path, capsys, meta):
    path = tmp_path / "meta.pt"
    torch.save({"format": CHECKPOINT_FORMAT, "model": {}, "rng": {}, "meta": meta}, path)
    assert main(["bench", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(path) in err, err


def test_random_weights_that_cannot_fit_are_refused_before_allocating(capsys, monkeypatch):
    import depthwidth.bench.serving as serving

    monkeypatch.setattr(serving, "bench", lambda target, config, **kw: target_module.load_target(target))
    argv = ["bench", "--layers", "64", "--width", "65536", "--heads", "512", "--vocab", "256", "--hardware", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the model L64-H65536-A512 (fp32 weights) needs at least" in err and "GiB free on this machine" in err
