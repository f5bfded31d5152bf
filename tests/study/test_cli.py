"""`depthwidth study show / validate` on the tiny reference study."""

from __future__ import annotations

import json
import subprocess
import sys


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "depthwidth", *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_show_lists_runs_and_one_run_with_its_curve(reference):
    runs = json.loads(cli("study", "show", str(reference.dir), "--json"))["runs"]
    assert [r["kind"] for r in runs] == ["train"] * 4 + ["bench"] * 2
    train = runs[0]
    one = json.loads(cli("study", "show", str(reference.dir), train["run_id"][:8], "--json"))
    assert one["run"]["run_id"] == train["run_id"] and one["result"]["val_loss"] == train["val_loss"]
    curve = one["curve"]
    assert [p["step"] for p in curve] == list(range(1, 25))
    assert [p["tokens"] for p in curve[:2]] == [256, 512]  # batch 8 x seq 32 per step
    assert [p["step"] for p in curve if p["val_loss"] is not None] == [8, 16, 24]
    assert curve[-1]["val_loss"] == train["val_loss"]  # the final evaluation is the run's val loss
    text = cli("study", "show", str(reference.dir), train["run_id"][:8])
    assert f"run {train['run_id']}" in text and "status completed after 1 attempt(s)" in text


def test_validate_lists_the_runs_without_running(reference, tmp_path):
    text = cli("study", "validate", str(reference.spec))
    assert "study 'tiny' is valid: 4 training runs (2 learning rates x 1 seed(s) per shape) and 2 benchmarks" in text
    assert "group 'shapes': 6,144 tokens per run; shapes L1-H32-A2, L4-H16-A2" in text
    data = json.loads(cli("study", "validate", str(reference.spec), "--json"))
    assert len(data["runs"]) == 6 and data["data"]["vocab_size"] == 256
