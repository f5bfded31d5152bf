"""`depthwidth calc` with --pp, --virtual-stages, --microbatches and the Megatron-LM accounting: the command
lines that reproduce Korthikanti et al. 2022, Figure 1 (first-stage activation memory of its Table 3 models,
references from its equations 2, 5 and 6 with the interleaving factor), plan and compare taking the same
flags, and one-line errors for bad values."""

import json
import subprocess
import sys

import pytest

from depthwidth import cli

S, V = 2048, 51200
#: Korthikanti et al. Table 3 (+ m = 3 interleaving stages for 175B and 530B, sec. 6), and the paper's
#: per-GPU activation bytes of the first stage: eq. 2 x L (baseline), eq. 6 (present), x (1 + (p-1)/(p m)).
ROWS = {  # name: (a, h, L, t, p, m, b, microbatches)
    "22B": (64, 6144, 48, 8, 1, 1, 4, 1),
    "175B": (96, 12288, 96, 8, 8, 3, 1, 64),
    "530B": (128, 20480, 105, 8, 35, 3, 1, 280),
    "1T": (160, 25600, 128, 8, 64, 1, 1, 512),
}


def command(name: str, *, present: bool) -> list[str]:
    a, h, n_layers, t, p, m, b, mb = ROWS[name]
    argv = ["calc", "--layers", str(n_layers), "--width", str(h), "--heads", str(a), "--vocab", str(V),
            "--max-seq-len", str(S), "--bias", "all", "--pos", "learned", "--tied", "--seq-len", str(S),
            "--batch", str(b), "--tp", str(t), "--pp", str(p), "--virtual-stages", str(m), "--microbatches", str(mb),
            "--train-precision", "fp16-mixed", "--convention", "megatron", "--attn-impl", "eager", "--dropout"]
    return argv + (["--sp", "--recompute", "selective"] if present else [])


def paper(name: str, *, present: bool) -> float:
    a, h, n_layers, t, p, m, b, _ = ROWS[name]
    sbh = S * b * h
    per_layer = sbh * 34 / t if present else sbh * (10 + 24 / t + 5 * a * S / (h * t))
    return per_layer * n_layers * (1 + (p - 1) / (p * m) if m > 1 else 1)


def run_json(argv: list[str], capsys) -> dict:
    assert cli.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("present", [False, True], ids=["baseline", "sp+selective"])
@pytest.mark.parametrize("name", list(ROWS))
def test_calc_reproduces_figure1(name, present, capsys):
    out = run_json(command(name, present=present), capsys)
    pipe = out["memory"]["pipeline"]
    first = pipe["stages"][0]
    assert pipe["peak_stage"] == 0
    assert out["memory"]["block_activation_bytes"] == first["layer_activation_bytes"]
    assert first["layer_activation_bytes"] == pytest.approx(paper(name, present=present), rel=0.02)
    a, h, n_layers, t, p, m, b, mb = ROWS[name]
    assert pipe["bubble_ratio"] == pytest.approx((p - 1) / (m * mb))
    assert out["settings"]["convention"] == "megatron" and out["settings"]["pp"] == p


def test_calc_table_shows_the_pipeline():
    result = subprocess.run([sys.executable, "-m", "depthwidth", *command("175B", present=True)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Pipeline: 8 stages, interleaved 1F1B, 3 chunks per stage, 64 micro-batches" in result.stdout
    assert "15+8+8" in result.stdout  # chunk-forwards the first stage keeps, per chunk
    assert "activations saved by the blocks" in result.stdout


def test_plan_and_compare_take_the_pipeline_flags(capsys):
    out = run_json(["plan", "--params", "124M", "--pp", "4", "--virtual-stages", "2", "--microbatches", "8",
                    "--convention", "megatron"], capsys)
    assert out["workload"]["virtual_stages"] == 2
    for member in out["members"]:
        assert member["shape"]["n_layers"] % 8 == 0  # every chunk gets as many layers
        assert member["memory"]["pipeline"]["bubble_ratio"] == pytest.approx(3 / 16)
    out = run_json(["compare", "L12-H768-A12", "L24-H512-A8", "--pp", "4", "--microbatches", "12"], capsys)
    deep = out["shapes"][1]["memory"]["pipeline"]
    assert deep["layers_per_stage"] == [6, 6, 6, 6] and deep["stages"][0]["in_flight"] == [4]


@pytest.mark.parametrize(("argv", "field"), [
    (["--pp", "13"], "pp=13"),
    (["--virtual-stages", "2"], "virtual_stages=2"),
    (["--pp", "5", "--virtual-stages", "2", "--microbatches", "10"], "virtual_stages=2"),
    (["--pp", "4", "--virtual-stages", "3", "--microbatches", "6"], "microbatches=6"),
    (["--pp", "0"], "--pp"),
    (["--residual-dtype", "fp8"], "--residual-dtype"),
])
def test_bad_pipeline_flags_are_one_line(argv, field, cli_error):
    assert field in cli_error(["calc", "--preset", "gpt2-small", *argv])
