"""benchmarks/check_examples.py: the reduction it applies to an example, the spec it writes back, the reason an
example gives for not running on a small CPU, and (slow) the tiny example run to a report with no warning."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "check_examples.py"


def _module():
    spec = importlib.util.spec_from_file_location("check_examples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def test_every_example_written_back_reads_as_the_same_spec():
    check = _module()
    paths = check.examples(None)
    assert {p.stem for p in paths} >= {"tiny", "demo", "iso-params", "iso-compute", "iso-time", "completep", "probes"}
    for path in paths:
        raw = tomllib.loads(path.read_text())
        assert tomllib.loads(check.to_toml(raw)) == raw, path.name


def test_every_example_is_reduced_or_says_why_it_cannot_run_on_a_small_cpu():
    check = _module()
    for path in check.examples(None):
        reason = check.skip_reason(path)
        assert (path.stem in check.REDUCTIONS) != (reason is not None), path.name
    reason = check.skip_reason(check.EXAMPLES / "iso-compute.toml")
    assert reason.startswith("each run is 1e16 training FLOPs") and "gpus_per_run = 1" in reason
    assert "\n" not in reason and "#" not in reason


def test_reduction_shortens_the_runs_and_keeps_the_learning_rate_protocol():
    check = _module()
    raw = tomllib.loads((check.EXAMPLES / "probes.toml").read_text())
    reduced = check.reduce_spec(raw, check.Reduction(factor=8, seeds=1))
    assert reduced["train"]["steps"] == 250 and reduced["train"]["warmup"] == 12  # 2000 / 8, 100 / 8 rounded
    assert reduced["eval"]["every"] == 62 and reduced["seeds"] == [0]
    assert reduced["lr"] == raw["lr"] and reduced["budget"] == raw["budget"] and reduced["data"] == raw["data"]
    assert raw["train"]["steps"] == 2000 and raw["seeds"] == [0, 1]  # the parsed spec is not changed

    timed = tomllib.loads((check.EXAMPLES / "iso-time.toml").read_text())
    halved = check.reduce_spec(timed, check.Reduction(factor=2, seeds=1))
    assert [b.get("seconds") for b in halved["budget"]] == [None, 0.03, 3.0]
    assert halved["train"]["tokens"] == 65_536 and halved["lr"]["transfer_seeds"] == 1

    per_param = tomllib.loads((check.EXAMPLES / "iso-params.toml").read_text())
    assert check.reduce_spec(per_param, check.Reduction(factor=400))["train"]["tokens_per_param"] == 0.05
    with pytest.raises(ValueError, match="flops budget"):
        check.reduce_spec(tomllib.loads((check.EXAMPLES / "iso-compute.toml").read_text()),
                          check.Reduction(factor=2))


def test_the_table_names_each_outcome():
    check = _module()
    rows = [check.Row(example="a", reduction="none", runs=10, seconds=12.3, report=True),
            check.Row(example="b", reduction="length/2", runs=4, seconds=5, report=True, warnings=("w",),
                      edge_warnings=("w",)),
            check.Row(example="c", reduction="none", skipped="too big")]
    text = check.format_rows(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["example", "reduction", "runs", "wall", "s", "warnings", "edge", "report", "outcome"]
    assert lines[2].split() == ["a", "none", "10", "12", "0", "0", "yes", "ok"]
    assert lines[3].split() == ["b", "length/2", "4", "5", "1", "1", "yes", "GRID", "EDGE"]
    assert lines[4].split() == ["c", "-", "-", "-", "-", "-", "-", "skipped"]
    assert "c: skipped: too big" in lines and "b: warning: w" in lines
    assert [r.ok for r in rows] == [True, False, True]


@pytest.mark.slow
def test_tiny_example_runs_to_a_report_with_its_learning_rates_bracketed(tmp_path):
    check = _module()
    row = check.check_example(check.EXAMPLES / "tiny.toml", check.REDUCTIONS["tiny"], tmp_path)
    assert row.error is None and row.warnings == () and row.edge_warnings == () and row.ok
    assert row.runs == 10  # 2 shapes x 4 learning rates (the search spends its whole budget) + 2 benchmarks
    assert row.report and (tmp_path / "report" / "index.html").is_file()
    status = subprocess.run([sys.executable, "-m", "depthwidth", "study", "status", str(tmp_path / "study"),
                             "--json"], capture_output=True, text=True, check=True)
    choices = json.loads(status.stdout)["lr_selection"]
    assert [c["shape_label"] for c in choices] == ["L1-H32-A4", "L4-H16-A2"]
    for c in choices:
        tried = [t["lr"] for t in c["trials"]]
        assert len(tried) == 4 and tried[:1] == [0.004] and 0.008 in tried and 0.016 in tried
        assert c["bracketed"] is True and c["edge"] is None and tried[0] < c["best_lr"] < tried[-1]
