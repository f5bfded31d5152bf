"""`inspect` on a run's own validation windows weights the slices as the trainer's evaluation does (each
slice's mean by its validation tokens, a dense probe's unscored positions left out), so the whole model's
loss is the run's final validation loss; and a model too large for the free memory is refused in one line,
exit 2, before its weights are read (an HF folder) or its model is built (a run)."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth.artifact.config import TrainConfig
from depthwidth.data.hops import IGNORE
from depthwidth.diagnose.inspect import inspect_run, validation_windows
from depthwidth.diagnose.layers import layer_report, loss_without
from depthwidth.shapes.shape import Shape

SHAPE = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32, pos="rope")


@pytest.fixture(scope="module")
def mixture_run(tmp_path_factory):
    """A run on a text slice and a dense hop-k probe slice, of very different validation sizes and losses."""
    from depthwidth.train import train

    folder = tmp_path_factory.mktemp("mixture")
    corpus = folder / "text.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 400, encoding="utf-8")
    config = TrainConfig(corpus=f"{corpus}+probe:hops:0,1:0,1,2@60", seq_len=32, batch_size=8, steps=8, threads=1,
                         eval_windows=6, lr=3e-3, cache_dir=str(folder / "cache"), peak_flops=1e11)
    result = train(SHAPE, config, out_dir=folder / "run")
    assert result.status == "completed" and len(result.val_loss_by_slice) == 2
    return folder / "run", config, result


def test_the_whole_models_loss_is_the_runs_validation_loss(mixture_run):
    from depthwidth.artifact.load import load_trained

    run_dir, config, result = mixture_run
    report = inspect_run(run_dir, windows=config.eval_windows).report
    assert report.loss == pytest.approx(result.val_loss, abs=1e-5)
    assert report.lens_loss[-1] == pytest.approx(result.val_loss, abs=1e-5)
    run = load_trained(run_dir)
    x, y, w = validation_windows(config, dataset_hash=run.meta.dataset_hash, windows=config.eval_windows)
    assert x.shape == y.shape == w.shape and float(w.sum()) == pytest.approx(1.0)
    assert bool((w[y == IGNORE] == 0).all()) and report.tokens == int((y != IGNORE).sum())
    # the weighting is what makes it equal: every scored position counted the same gives another loss
    plain = loss_without(run.model, inputs=x, targets=y)
    assert abs(plain - result.val_loss) > 1e-3
    # each slice alone: the run's own per-slice loss
    text, probe = sorted(result.val_loss_by_slice, key=lambda name: name.startswith("probe"))
    n_text = config.eval_windows
    assert loss_without(run.model, inputs=x[:n_text], targets=y[:n_text]) == pytest.approx(
        result.val_loss_by_slice[text], abs=1e-5)
    assert loss_without(run.model, inputs=x[n_text:], targets=y[n_text:]) == pytest.approx(
        result.val_loss_by_slice[probe], abs=1e-5)
    # the drop-a-layer increases are measured under the same weights
    weighted = layer_report(run.model, inputs=x, targets=y, weights=w, greedy=False)
    assert weighted.drop_increase[0] + weighted.loss == pytest.approx(
        loss_without(run.model, inputs=x, targets=y, weights=w, skip=[0]), abs=1e-9)


def _tiny_hf(folder, capsys):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=48)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    capsys.readouterr()  # what transformers printed while saving
    return folder


def test_a_model_that_does_not_fit_is_refused_in_one_line(mixture_run, tmp_path, monkeypatch, capsys, cli_error):
    from depthwidth.machine import memory

    hf = _tiny_hf(tmp_path / "hf", capsys)
    text = tmp_path / "t.txt"
    text.write_text("some words to read\n" * 10, encoding="utf-8")
    monkeypatch.setattr(memory, "available_memory", lambda device="cpu": 64 * 1024.0)  # 64 KiB free
    line = cli_error(["inspect", "--hf-model", str(hf), "--text", str(text)])
    assert str(hf) in line and "needs at least" in line and "free on this machine" in line
    assert "weights" in line and "L2-H32" in line
    line = cli_error(["inspect", str(mixture_run[0])])
    assert "needs at least" in line and "free on this machine" in line


def test_an_hf_folder_with_an_empty_text_is_one_line(tmp_path, capsys, cli_error):
    hf = _tiny_hf(tmp_path / "hf", capsys)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    assert "empty" in cli_error(["inspect", "--hf-model", str(hf), "--text", str(empty)])
    assert "one of them" in cli_error(["inspect", "--hf-model", str(hf)])
    (hf / "model.safetensors").unlink()
    assert "safetensors" in cli_error(["inspect", "--hf-model", str(hf), "--text", str(empty)]).lower()
    json.loads((hf / "config.json").read_text())  # the folder kept its config
