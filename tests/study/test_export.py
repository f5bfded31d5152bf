"""`depthwidth study export` on the tiny reference study: the recommended shape (`--best`, what
`recommend` picks without limits) and every shape (`--all`), each from its best seed's run, loaded by
transformers with our logits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from depthwidth.cli import main

os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_best_exports_the_recommended_shape(reference, tmp_path, capsys):
    from depthwidth.bench.target import load_checkpoint_model

    code, out, err = _cli(capsys, "recommend", reference.dir, "--json")
    assert code == 0, err
    key = json.loads(out)["chosen"]
    shapes = json.loads(_cli(capsys, "study", "status", reference.dir, "--json")[1])["shapes"]
    (chosen,) = [s for s in shapes if f"{s['group']}/{s['shape_label']}" == key]
    code, out, err = _cli(capsys, "study", "export", reference.dir, "--best", "-o", tmp_path / "best", "--json")
    assert code == 0, err
    (wrote,) = json.loads(out)["exports"]
    assert wrote["shape_label"] == chosen["shape_label"] and wrote["finished"]
    run_id = min(zip(chosen["seed_losses"], chosen["best_run_ids"]))[1]
    assert wrote["source"].endswith(run_id[:16])
    ours = load_checkpoint_model(Path(wrote["source"])).model
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "best").eval()
    tokens = torch.arange(32).view(1, 32) % 256
    with torch.no_grad():
        assert (ours(tokens)[0] - theirs(tokens).logits).abs().max().item() <= 1e-5


def test_all_exports_every_shape_into_its_folder(reference, tmp_path, capsys):
    code, out, err = _cli(capsys, "study", "export", reference.dir, "--all", "-o", tmp_path / "all")
    assert code == 0, err
    shapes = json.loads(_cli(capsys, "study", "status", reference.dir, "--json")[1])["shapes"]
    expected = sorted(f"{s['group']}-{s['shape_label']}" for s in shapes)
    assert len(expected) == 2 and sorted(p.name for p in (tmp_path / "all").iterdir()) == expected
    assert len(out.strip().splitlines()) == 2 and all("GPT2LMHeadModel" in line for line in out.splitlines())
    for folder in (tmp_path / "all").iterdir():
        assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    code, _, err = _cli(capsys, "study", "export", reference.dir, "--all", "-o", tmp_path / "all")
    assert code == 2 and "is not empty" in err
