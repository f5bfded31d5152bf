"""The eager-block per-op cost (the part of the machine's measurement that needs our model) and
`depthwidth hw`, which measures with it and saves where the machine module keeps profiles."""

import json

from depthwidth.bench.hw import eager_block_overhead
from depthwidth.cli import main
from depthwidth.machine import EAGER_BLOCK_OP, load_profile, profile_path


def test_eager_block_overhead_is_a_few_microseconds_per_op():
    per_op = eager_block_overhead(device="cpu", repeat=2)
    assert 1e-8 < per_op < 1e-3


def test_cli_measure_saves_the_profile_with_the_block_cost(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "p.json"
    assert main(["hw", "measure", "--quick", "--threads", "1", "--device", "cpu", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    profile = load_profile(out)
    assert printed["path"] == str(out) and profile.peak_flops == printed["peak_flops"]
    assert profile.op_overhead_s == profile.op_overheads[EAGER_BLOCK_OP] > 0
    assert not (tmp_path / "cache").exists()  # --out given: nothing else written
    assert main(["hw", "measure", "--quick", "--threads", "1", "--dtypes", "fp32", "--device", "cpu"]) == 0
    saved = profile_path(threads=1)
    assert str(saved) in capsys.readouterr().out and saved.parent == tmp_path / "cache"
    assert set(load_profile(saved).peak_flops) == {"fp32"}


def test_cli_list_and_refusals(tmp_path, capsys):
    assert main(["hw", "list", "--json"]) == 0
    names = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert {"h100-sxm", "h200", "a100-40gb", "a100-80gb", "l4", "rtx-4090", "mi300x", "cpu"} <= set(names)
    out = tmp_path / "p.json"
    assert main(["hw", "measure", "--quick", "--dtypes", "fp16", "--device", "cpu", "--out", str(out)]) == 2
    assert "never use it" in capsys.readouterr().err and not out.exists()
