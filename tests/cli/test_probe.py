"""depthwidth probe: examples shown as 'prompt | answer', capacity as JSON, bad input as one line."""

import json
import subprocess
import sys

import pytest


def dw(*args):
    return subprocess.run([sys.executable, "-m", "depthwidth", "probe", *args], capture_output=True, text=True,
                          timeout=300)


def test_show_prints_prompt_and_answer_of_addition():
    out = dw("show", "addition", "--difficulty", "3", "-n", "4")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4
    for line in lines:
        prompt, answer = line.split(" | ")
        a, b = prompt.rstrip("=").split("+")
        assert int(a) + int(b) == int(answer) and len(a) == 3


def test_capacity_json_has_one_point_per_fact_count(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    out = dw("capacity", "--shape", "L1-H32-A2", "--facts", "8,32", "--epochs", "1", "--repeats", "2",
             "--batch-size", "4", "--seq-len", "32", "--threads", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [p["n_facts"] for p in data["points"]] == [8, 32]
    # tied embedding, learned positions (32 rows), one block, three weight-only norms
    assert data["params"] == 32 * 256 + 32 * 32 + 12 * 32 * 32 + 3 * 32
    for p in data["points"]:
        assert p["status"] == "completed" and 0.0 <= p["accuracy"] <= 1.0
        assert p["bits_per_param"] == pytest.approx(p["bits"] / data["params"])


@pytest.mark.parametrize("args, words", [
    (("show", "nope"), "name='nope' is unknown"),
    (("show", "recall", "--difficulty", "99"), "difficulty=99"),
    (("capacity", "--shape", "L1-H32-A2", "--facts", "0,4"), "positive integer"),
])
def test_bad_input_is_one_line_with_exit_2(args, words):
    out = dw(*args)
    assert out.returncode == 2
    assert words in out.stderr and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
