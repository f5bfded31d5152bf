"""`depthwidth check coord` and `depthwidth check transfer` on tiny models: the table, --json, --plot, and
one-line errors for bad flags."""

from __future__ import annotations

import json

import pytest

from depthwidth.cli import main

TEXT = "the quick brown fox jumps over the lazy dog; seven wizards quietly hex bad jugglers.\n" * 80
TINY = ["--head-dim", "8", "--seq-len", "16", "--batch-size", "2", "--threads", "1"]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text(TEXT)
    return path


def test_coord_json_and_plot(text_file, tmp_path, capsys):
    plot = tmp_path / "coord.png"
    rc = main(["check", "coord", "--widths", "16,32", "--depths", "1,2", "--parametrization", "sp,completep",
               "--steps", "2", "--corpus", str(text_file), "--json", "--plot", str(plot), *TINY])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    points = out["points"]
    assert [(p["parametrization"], p["width"], p["depth"]) for p in points] == [
        (pz, w, d) for pz in ("sp", "completep") for d in (1, 2) for w in (16, 32)]
    for p in points:
        assert len(p["layer_rms"]) == p["depth"] and p["last_layer_rms"] == p["layer_rms"][-1] > 0
        assert p["logits_rms"] > 0 and p["last_layer_update_rms"] > 0
    sp = [p for p in points if p["parametrization"] == "sp" and p["depth"] == 1]
    assert out["growth"]["sp"]["width"]["last"] == pytest.approx(sp[1]["last_layer_rms"] / sp[0]["last_layer_rms"])
    assert (out["base_width"], out["base_depth"], out["steps"]) == (16, 1, 2)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out["plot"] == str(plot)


def test_coord_table(text_file, capsys):
    rc = main(["check", "coord", "--widths", "16", "--depths", "1,2", "--parametrization", "mup", "--steps", "1",
               "--corpus", str(text_file), *TINY])
    assert rc == 0
    out = capsys.readouterr().out
    assert "coordinate check: 1 AdamW steps at lr 0.01" in out
    assert out.count("\nmup ") == 2 and "over depth: last layer" in out


def test_transfer_json_table_and_plot(text_file, tmp_path, capsys):
    args = ["check", "transfer", "--widths", "16,32", "--depths", "1,2", "--parametrization", "sp,completep",
            "--lrs", "3", "--lr-min", "1e-3", "--lr-max", "1e-1", "--steps", "3", "--eval-windows", "2",
            "--corpus", str(text_file), *TINY]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lrs"] == pytest.approx([1e-3, 1e-2, 1e-1])
    shapes = [(c["parametrization"], c["width"], c["depth"]) for c in out["curves"]]
    assert shapes == [(pz, w, d) for pz in ("sp", "completep") for w, d in ((16, 1), (32, 1), (16, 2))]
    for c in out["curves"]:
        finite = [v for v in c["val_loss"] if v is not None]
        assert c["val_loss"][c["best_index"]] == min(finite)
    shift = out["shift"]["sp"]["width"]
    best = [c["best_index"] for c in out["curves"] if c["parametrization"] == "sp" and c["depth"] == 1]
    assert shift["grid_steps"] == max(best) - min(best)
    plot = tmp_path / "transfer.svg"
    assert main([*args, "--plot", str(plot)]) == 0
    table = capsys.readouterr().out
    assert "how far the optimum moves" in table and table.count("\ncompletep ") == 3
    assert plot.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("argv,expected", [
    (["check", "coord", "--widths", "0"], "--widths: 0 must be a positive integer"),
    (["check", "coord", "--widths", "20"], "--widths 20 must be multiples of --head-dim 16"),
    (["check", "coord", "--parametrization", "sp,umup"], "--parametrization: 'sp,umup'"),
    (["check", "coord", "--plot", "out.txt"], "--plot 'out.txt' must end in .png, .svg or .pdf"),
    (["check", "transfer", "--lr-min", "1e-2", "--lr-max", "1e-3"], "--lr-min 0.01 must be below --lr-max 0.001"),
    (["check", "transfer", "--lrs", "1"], "with --lrs 1 >= 2 points"),
    (["check", "transfer", "--steps", "1"], "--steps 1: a transfer run needs at least 2 steps"),
    (["check", "coord", "--steps", "-3"], "--steps"),
])
def test_bad_flags_are_one_line(cli_error, argv, expected):
    assert expected in cli_error(argv)


def test_a_plot_into_a_missing_folder_is_refused_before_training(cli_error, tmp_path):
    line = cli_error(["check", "coord", "--plot", str(tmp_path / "nope" / "c.png")])
    assert "its folder does not exist" in line
