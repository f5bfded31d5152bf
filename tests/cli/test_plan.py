"""`depthwidth plan` and `depthwidth compare` as a user runs them: JSON keys like calc's, values recomputed
independently, a readable plot, one-line errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from depthwidth.cli import main
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape


def run_json(capsys, *argv):
    assert main(list(argv) + ["--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def calc_keys():
    out = subprocess.run([sys.executable, "-m", "depthwidth", "calc", "--shape", "L2-H64-A4", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout))


def test_plan_members_have_calc_keys_and_are_within_tolerance(capsys, calc_keys):
    out = run_json(capsys, "plan", "--params", "124M", "--count", "5", "--hardware", "h100")
    members = out["members"]
    assert len(members) == 5
    for m in members:
        assert calc_keys <= set(m) and {"plan", "latency", "lint"} <= set(m)
        shape = Shape.from_dict(m["shape"])
        total = count_params(shape).total
        assert m["params"]["total"] == total
        assert abs(total / 124e6 - 1) <= 0.05 and m["plan"]["error"] == pytest.approx(total / 124e6 - 1)
    depths = [m["shape"]["n_layers"] for m in members]
    assert max(depths) / min(depths) >= 4
    assert any(m["plan"]["pareto"] for m in members)
    # at equal parameters: decode latency grows with depth; activation memory per layer with width;
    # KV cache per token with n_layers * n_kv_heads * head_dim
    by_depth = sorted(members, key=lambda m: m["shape"]["n_layers"])
    decode = [m["latency"]["decode_ms"] for m in by_depth]
    assert decode == sorted(decode)
    by_width = sorted(members, key=lambda m: m["shape"]["d_model"])
    act = [m["memory"]["activation_bytes_per_layer"] for m in by_width]
    assert act == sorted(act) and len(set(act)) == len(act)
    for m in members:
        s = m["shape"]
        assert m["memory"]["kv_cache_bytes_per_token"] == 2 * s["n_layers"] * s["n_kv_heads"] * s["head_dim"] * 2


def test_plan_iso_compute_and_tables(capsys):
    out = run_json(capsys, "plan", "--flops", "1e19", "--tokens-per-param", "20", "--seq-len", "1024")
    assert out["family"]["kind"] == "iso-compute"
    for m in out["members"]:
        assert abs(m["plan"]["train_flops"] / 1e19 - 1) <= 0.05
        assert m["plan"]["tokens"] == pytest.approx(20 * m["params"]["total"])
    assert main(["plan", "--params", "124M", "--tp", "2", "--hardware", "a100"]) == 0
    text = capsys.readouterr().out
    assert "iso-params family at 124M parameters" in text and "Costs on a100-80gb" in text and "decode ms/tok" in text
    assert "Pareto-best" in text


def test_plan_on_a_measured_profile_and_tiny_grid(capsys, tmp_path):
    profile = tmp_path / "p.json"
    assert main(["hw", "measure", "--quick", "--threads", "1", "--device", "cpu", "--out", str(profile)]) == 0
    capsys.readouterr()
    out = run_json(capsys, "plan", "--params", "1M", "--vocab", "256", "--max-seq-len", "128", "--align", "16",
                   "--head-dim", "16", "--hardware", str(profile), "--dtype", "fp32")
    assert out["hardware"]["name"] == "measured-cpu"
    assert all(m["shape"]["d_model"] % 16 == 0 and m["shape"]["vocab_size"] == 256 for m in out["members"])


def test_plot_is_written(capsys, tmp_path):
    path = tmp_path / "family.png"
    assert main(["plan", "--params", "124M", "--plot", str(path)]) == 0
    assert path.stat().st_size > 20_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_the_seeds_question(capsys, calc_keys):
    out = run_json(capsys, "compare", "L12-H768-A12", "L24-H512-A8")
    a, b = out["shapes"]
    assert calc_keys <= set(a) and a["name"] == "L12-H768-A12"
    (ratios,) = out["ratios_to_first"]
    assert ratios["shape.n_layers"] == 2 and ratios["shape.d_model"] == pytest.approx(2 / 3)
    pa = count_params(Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50257)).total
    pb = count_params(Shape(n_layers=24, d_model=512, n_heads=8, vocab_size=50257)).total
    assert ratios["params.total"] == pytest.approx(pb / pa)
    assert ratios["memory.kv_cache_bytes_per_token"] == pytest.approx(24 * 512 / (12 * 768))
    assert ratios["latency.decode_ms"] > 1  # twice the layers: slower per token at batch 1
    assert main(["compare", "gpt2-small", "L24-H512-A8", "--hardware", "l4"]) == 0
    assert "L24-H512-A8 / gpt2-small" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["plan", "--params", "1k"], "smallest shape on the grid"),
    (["plan", "--params", "124M", "--tp", "1000"], "tp=1000"),
    (["plan", "--params", "124M", "--hardware", "tpu-v9"], "known: h100-sxm, h200, a100-40gb"),
    (["plan", "--params", "124M", "--tolerance", "0.01%"], "no shape is within"),
    (["plan"], "give one budget"),
    (["plan", "--flops", "1e19"], "--tokens-per-param"),
    (["plan", "--params", "124M", "--hardware", "/nonexistent/p.json"], "no hardware profile at /nonexistent/p.json"),
    (["compare", "L12-H768-A12", "L24-H512-A8", "--tp", "5"], "tp=5 divides the heads of none"),
    (["compare", "L12-H768-A12", "no-such-model"], "cannot read 'no-such-model'"),
    (["compare", "L12-H768-A12"], "two or more"),
])
def test_bad_input_is_one_line_with_status_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_flag_values_from_a_real_process_and_no_torch_import():
    bad = subprocess.run([sys.executable, "-m", "depthwidth", "plan", "--params", "lots"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "not an amount" in bad.stderr and bad.stderr.count("\n") == 1
    script = ("import sys; from depthwidth.cli import main; rc = main(['plan', '--params', '50M', '--json']);"
              "assert rc == 0; assert 'torch' not in sys.modules, 'plan imported torch'")
    ok = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
