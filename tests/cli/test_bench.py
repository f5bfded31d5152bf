"""`depthwidth bench` end to end: JSON and tables, a trained checkpoint with int8, and bad input
(foreign, text or truncated checkpoints, contexts past the position table) as one line and exit 2."""

from __future__ import annotations

import json
import math

import pytest
import torch

from depthwidth.machine import EAGER_BLOCK_OP, HardwareProfile, device_name, profile_path, save_profile
from depthwidth.cli import main

SHAPE = ["--layers", "2", "--width", "32", "--heads", "4", "--kv-heads", "2", "--vocab", "64", "--max-seq-len", "48"]
QUICK = ["--prompt-lens", "4,8", "--contexts", "4,16", "--batches", "1,2", "--new-tokens", "3", "--repeat", "2",
         "--warmup", "0"]


@pytest.fixture(autouse=True)
def profile(tmp_path, monkeypatch):
    """A stored profile matching this process, so no test measures the machine."""
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    prof = HardwareProfile(
        device="cpu", device_name=device_name("cpu"), threads=torch.get_num_threads(), gemm=(),
        peak_flops={"fp32": 1e11, "bf16": 2e11}, copy_bandwidth=2e10, op_overhead_s=4e-6,
        op_overheads={EAGER_BLOCK_OP: 4e-6},
        mem_capacity=8e9, torch_version=torch.__version__, created="2026-01-01T00:00:00+00:00", quick=False,
    )
    save_profile(prof, profile_path(threads=torch.get_num_threads()))  # where bench looks for it
    return prof


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 3-step run of our trainer on a small text file: run folder and its recorded validation loss."""
    from depthwidth.shapes.shape import Shape
    from depthwidth.artifact.config import TrainConfig
    from depthwidth.train.loop import train

    root = tmp_path_factory.mktemp("trained")
    corpus = root / "corpus.txt"
    corpus.write_text("To be, or not to be, that is the question. " * 200)
    shape = Shape(n_layers=2, d_model=32, n_heads=4, vocab_size=256, max_seq_len=32, tie_embeddings=False)
    config = TrainConfig(corpus=str(corpus), tokenizer="byte", seq_len=16, batch_size=4, steps=3,
                         cache_dir=str(root / "cache"), eval_windows=4)
    result = train(shape, config, out_dir=root / "run")
    return root / "run", result.val_loss


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_output_has_measured_predicted_and_ratio(capsys) -> None:
    code, out, err = _run(capsys, *SHAPE, *QUICK, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [(p["kind"], p["tokens"]) for p in data["latency"]] == [
        ("prefill", 4), ("prefill", 8), ("decode", 4), ("decode", 16)]
    for p in data["latency"]:
        assert p["seconds"]["median"] > 0 and p["predicted_s"] > 0
        assert p["ratio"] == pytest.approx(p["seconds"]["median"] / p["predicted_s"])
    assert [t["batch"] for t in data["throughput"]] == [1, 2]
    assert all(c["equal"] and c["measured_bytes"] > 0 for c in data["kv_cache"])
    assert data["hardware"]["name"] == "measured-cpu" and data["hardware"]["mem_bandwidth"] == 2e10
    assert data["environment"]["torch"] == torch.__version__
    assert err == ""  # no progress bar with --json


def test_table_output(capsys) -> None:
    code, out, _ = _run(capsys, *SHAPE, *QUICK, "--dtype", "bf16", "--no-throughput")
    assert code == 0
    for text in ("measured ms", "predicted ms", "ratio", "decode @ctx", "KV cache", "L2-H32-A4-KV2"):
        assert text in out
    assert "throughput" not in out.lower()  # --no-throughput


def test_trained_checkpoint_with_int8_reports_the_loss_change(capsys, trained) -> None:
    run_dir, val_loss = trained
    code, out, err = _run(capsys, "--checkpoint", str(run_dir), *QUICK, "--quantize", "int8", "--json")
    assert code == 0, err
    data = json.loads(out)
    q = data["quantization"]
    # the fp32 loss is the trainer's own evaluation of the same weights on the same windows
    assert q["val_loss_before"] == pytest.approx(val_loss, abs=1e-9)
    assert math.isfinite(q["val_loss_after"])
    assert q["val_loss_change"] == pytest.approx(q["val_loss_after"] - q["val_loss_before"])
    assert q["quantized_linears"] == 4 * 2 + 1  # qkv, out, up, down per block, untied head
    assert {p["variant"] for p in data["latency"]} == {"fp32", "int8"}
    assert data["checkpoint"].endswith("checkpoint.pt")


def _assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for f in fragments:
        assert f in lines[0], lines[0]


def test_text_file_checkpoint(capsys, tmp_path) -> None:
    path = tmp_path / "notes.pt"
    path.write_text("these are not weights\n")
    code, _, err = _run(capsys, "--checkpoint", str(path), *QUICK)
    _assert_one_line_error(code, err, "notes.pt", "not a PyTorch checkpoint")


def test_foreign_torch_file(capsys, tmp_path) -> None:
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.randn(3, 3), "epoch": 4}, path)
    code, _, err = _run(capsys, "--checkpoint", str(path), *QUICK)
    _assert_one_line_error(code, err, "other.pt", "not a depthwidth checkpoint")


def test_truncated_checkpoint(capsys, tmp_path, trained) -> None:
    run_dir, _ = trained
    data = (run_dir / "checkpoint.pt").read_bytes()
    path = tmp_path / "cut.pt"
    path.write_bytes(data[: len(data) // 2])
    code, _, err = _run(capsys, "--checkpoint", str(path), *QUICK)
    _assert_one_line_error(code, err, "cut.pt", "cannot be read")


def test_missing_checkpoint(capsys, tmp_path) -> None:
    code, _, err = _run(capsys, "--checkpoint", str(tmp_path / "nope.pt"), *QUICK)
    _assert_one_line_error(code, err, "nope.pt", "does not exist")


def test_context_longer_than_the_position_table(capsys) -> None:
    code, _, err = _run(capsys, *SHAPE, "--prompt-lens", "4", "--contexts", "64", "--repeat", "1", "--json")
    _assert_one_line_error(code, err, "contexts", "max_seq_len=48")


def test_context_longer_than_a_checkpoint_table(capsys, trained) -> None:
    run_dir, _ = trained
    code, _, err = _run(capsys, "--checkpoint", str(run_dir), "--prompt-lens", "4", "--contexts", "40")
    _assert_one_line_error(code, err, "contexts", "max_seq_len=32")


def test_encoder_shape_is_refused(capsys) -> None:
    code, _, err = _run(capsys, *SHAPE, "--kind", "encoder", "--prompt-lens", "4", "--contexts", "4")
    _assert_one_line_error(code, err, "causal decoder", "kind='encoder'")


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--prompt-lens", "4,x"], "--prompt-lens"),
        (["--dtype", "fp16"], "--dtype"),
        (["--quantize", "int4"], "--quantize"),
        (["--checkpoint", "x.pt", "--layers", "2"], "--checkpoint already gives the shape"),
    ],
)
def test_bad_flags(capsys, argv, fragment) -> None:
    with pytest.raises(SystemExit) as info:
        code = main(["bench", *SHAPE[2:], *argv]) if argv[0] == "--checkpoint" else main(["bench", *SHAPE, *argv])
        raise SystemExit(code)
    _, err = capsys.readouterr()
    _assert_one_line_error(info.value.code, err, fragment)
