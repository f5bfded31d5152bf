"""`depthwidth inspect` end to end on a tiny run trained by our trainer, `export --drop-layers` (the exported
model with block k removed gives the drop-a-layer loss of block k, CompleteP's multipliers kept), and
every bad input as one line, exit 2."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth import cli
from depthwidth.diagnose.inspect import inspect_hf, inspect_run
from depthwidth.shapes.shape import Shape

SHAPE = Shape(n_layers=3, d_model=32, n_heads=4, vocab_size=256, max_seq_len=32, pos="rope", norm="rmsnorm",
              ffn="swiglu", bias="none", tie_embeddings=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from depthwidth.artifact.config import TrainConfig
    from depthwidth.train import train

    folder = tmp_path_factory.mktemp("inspect") / "run"
    config = TrainConfig(corpus="python-docs", tokenizer="byte", seq_len=32, batch_size=4, steps=6, lr=3e-3,
                         threads=1, eval_windows=4, peak_flops=1e11, parametrization="completep",
                         cache_dir=str(folder.parent / "cache"))
    train(SHAPE, config, out_dir=folder)
    return folder


def test_the_cli_reports_every_layer_as_json_and_plots(run_dir, tmp_path, capsys):
    plot = tmp_path / "layers.png"
    assert cli.main(["inspect", str(run_dir), "--windows", "2", "--json", "--plot", str(plot)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_layers"] == 3 and len(out["drop_increase"]) == 3 and len(out["pair_increase"]) == 2
    assert out["lens_loss"][-1] == pytest.approx(out["loss"], abs=1e-6)
    assert 0 <= out["effective_depth"] <= 3 and out["data"] == "validation of python-docs"
    assert out["windows"] >= 2 and plot.read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["inspect", str(run_dir), "--windows", "1"]) == 0
    assert "effective depth" in capsys.readouterr().out


def test_the_exported_model_without_block_k_has_its_drop_a_layer_loss(run_dir, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 20, encoding="utf-8")
    report = inspect_run(run_dir, text=text, windows=4).report
    for k in (0, 2):
        out = tmp_path / f"drop{k}"
        assert cli.main(["export", str(run_dir), "-o", str(out), "--drop-layers", str(k), "--json"]) == 0
        exported = json.loads(capsys.readouterr().out)
        assert exported["shape"]["n_layers"] == 2
        dropped = inspect_hf(out, text=text, windows=4).report
        assert dropped.loss == pytest.approx(report.loss + report.drop_increase[k], abs=1e-5)
    pair = tmp_path / "pair"
    assert cli.main(["export", str(run_dir), "-o", str(pair), "--drop-layers", "1,0"]) == 0
    capsys.readouterr()
    assert inspect_hf(pair, corpus="python-docs", windows=2).report.n_layers == 1
    assert inspect_hf(pair, text=text, windows=4).report.loss == pytest.approx(
        report.loss + report.pair_increase[0], abs=1e-5)


def test_bad_inputs_are_one_line(run_dir, tmp_path, cli_error):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    (tmp_path / "nock").mkdir()
    weird = tmp_path / "weird"
    weird.mkdir()
    (weird / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}), encoding="utf-8")
    assert "checkpoint" in cli_error(["inspect", str(tmp_path / "nock")]).lower()
    assert "bert" in cli_error(["inspect", "--hf-model", str(weird), "--text", str(empty)])
    assert "empty" in cli_error(["inspect", str(run_dir), "--text", str(empty)])
    assert "out of range" in cli_error(["inspect", str(run_dir), "--windows", "0"])
    assert "out of range" in cli_error(["inspect", str(run_dir), "--windows", "100000"])
    assert "tolerance" in cli_error(["inspect", str(run_dir), "--windows", "1", "--tolerance", "-1"])
    assert "one of them" in cli_error(["inspect"])
    out = str(tmp_path / "x")
    assert "out of range" in cli_error(["export", str(run_dir), "-o", out, "--drop-layers", "3"])
    assert "more than once" in cli_error(["export", str(run_dir), "-o", out, "--drop-layers", "1,1"])
    assert "all 3 layers" in cli_error(["export", str(run_dir), "-o", out, "--drop-layers", "0,1,2"])
    assert "layer numbers" in cli_error(["export", str(run_dir), "-o", out, "--drop-layers", "a"])


def test_a_run_and_its_full_export_give_the_same_report(run_dir, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("import os\nprint(os.getcwd())\n" * 10, encoding="utf-8")
    assert cli.main(["export", str(run_dir), "-o", str(tmp_path / "full")]) == 0
    a = inspect_run(run_dir, text=text, windows=3).report
    b = inspect_hf(tmp_path / "full", text=text, windows=3).report
    assert b.loss == pytest.approx(a.loss, abs=1e-5)
    torch.testing.assert_close(torch.tensor(b.drop_increase), torch.tensor(a.drop_increase), rtol=0, atol=1e-5)
