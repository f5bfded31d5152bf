"""What a run would refuse, `study validate` refuses first (so a spec that validates runs), with the
file, the line and the key; and the tool never waits unbounded on a Ray address."""

from __future__ import annotations

import socket

import pytest

from depthwidth.errors import UserError
from depthwidth.study.executors import ray as ray_executor

SPEC = """name = "hostile"
hardware = "cpu"
[data]
corpus = "{corpus}"
seq_len = {seq_len}
batch_size = {batch_size}
[train]
steps = {steps}
warmup = {warmup}
[lr]
grid = [1e-3]
[[shape]]
n_layers = 1
d_model = {d_model}
n_heads = 2
"""


def write_spec(tmp_path, corpus, **values) -> str:
    fields = {"corpus": corpus, "seq_len": 32, "batch_size": 8, "steps": 10, "warmup": 2, "d_model": 32, **values}
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(**fields))
    return str(path)


def test_a_context_longer_than_the_validation_split_is_refused_by_validate(tmp_path, tiny_corpus, cli_error):
    # the 60 KB corpus holds one training batch of 50,000 tokens, but its validation tail has about 6,000
    spec = write_spec(tmp_path, tiny_corpus, seq_len=50000, batch_size=1)
    err = cli_error(["study", "validate", spec])
    assert err.startswith(f"depthwidth study: error: {spec}:5: data.seq_len: slice 'text' has ")
    assert "val tokens, fewer than seq_len + 1 = 50001; raise val_fraction or lower seq_len" in err


def test_warmup_past_the_steps_is_refused_by_validate(tmp_path, tiny_corpus, cli_error):
    spec = write_spec(tmp_path, tiny_corpus, warmup=20)
    assert cli_error(["study", "validate", spec]) == \
        f"depthwidth study: error: {spec}:9: train.warmup: warmup=20 must be fewer than the 10 training steps"


def test_steps_beyond_any_run_are_refused_by_validate(tmp_path, tiny_corpus, cli_error):
    spec = write_spec(tmp_path, tiny_corpus, steps=99999999999999999999)
    assert cli_error(["study", "validate", spec]) == (
        f"depthwidth study: error: {spec}:8: train.steps: steps=~10^20 is above the limit of 1,000,000,000 "
        "(a billion optimizer steps; the longest published runs take a few million)")


def test_a_width_beyond_any_model_is_refused_by_validate(tmp_path, tiny_corpus, cli_error):
    spec = write_spec(tmp_path, tiny_corpus, d_model=10**30)
    assert cli_error(["study", "validate", spec]) == (
        f"depthwidth study: error: {spec}:12: shape[0]: d_model=~10^30 is above the limit of 131,072 "
        "(7x the widest published model (18432))")


@pytest.mark.parametrize("text, message", [
    ("name = 'x'\nseeds = [" + "9" * 5000 + "]\n", "not readable TOML (ValueError: Exceeds the limit (4300 digits)"),
    ("name = 'x'\nseeds = " + "[" * 3000 + "]" * 3000 + "\n", "not readable TOML (RecursionError"),
    ("name = 'x'\n[train\n", "not valid TOML: "),
])
def test_unreadable_toml_is_one_line(tmp_path, cli_error, text, message):
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert message in cli_error(["study", "validate", str(path)])


@pytest.mark.parametrize("address, message", [
    ("nosuch:1", "--address nosuch:1: host 'nosuch' does not resolve"),
    ("nosuch", "--address 'nosuch': expected HOST:PORT (such as 10.0.0.1:6379), ray://HOST:PORT or auto"),
])
def test_a_ray_address_that_cannot_answer_is_one_line_and_touches_nothing(tmp_path, tiny_corpus, cli_error, address,
                                                                          message):
    pytest.importorskip("ray")
    spec, folder = write_spec(tmp_path, tiny_corpus), tmp_path / "study"
    err = cli_error(["study", "run", spec, "--dir", str(folder), "--executor", "ray", "--address", address])
    assert message in err and not folder.exists()


def test_a_closed_port_is_refused_without_waiting():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UserError, match=rf"--address 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port} "
                                        r"\(Connection refused\)"):
        ray_executor.check_address(f"127.0.0.1:{port}", timeout=5)


def test_a_listener_that_never_answers_is_given_up_after_the_timeout(monkeypatch):
    # the throwaway process that would join the cluster hangs, as Ray does on an address that is not Ray
    monkeypatch.setattr(ray_executor, "_JOIN", "import time; time.sleep(60)")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        with pytest.raises(UserError, match=rf"--address 127.0.0.1:{port}: no Ray cluster answered within 1.5 s "
                                            r"\(set DEPTHWIDTH_RAY_TIMEOUT to wait longer\)"):
            ray_executor.check_address(f"127.0.0.1:{port}", timeout=1.5)


@pytest.mark.parametrize("value", ["soon", "-3", "1e9"])
def test_the_ray_timeout_setting_is_checked(monkeypatch, value):
    monkeypatch.setenv(ray_executor.TIMEOUT_ENV, value)
    with pytest.raises(UserError, match="DEPTHWIDTH_RAY_TIMEOUT="):
        ray_executor.connect_timeout()


def test_a_failed_run_stores_the_first_line_of_its_error(monkeypatch):
    from depthwidth.study import jobs

    def crash(job, *, progress):  # a kernel error followed by pages of C++ frames
        raise RuntimeError("could not allocate 4 PB\nframe #0: c10::alloc\nframe #1: at::empty\n" * 50)

    monkeypatch.setattr(jobs, "_train", crash)
    outcome = jobs.execute(jobs.Job(run_id="r", kind="train", config={}, run_dir="unused"))
    assert outcome.status == "failed"
    assert outcome.error.startswith("RuntimeError: could not allocate 4 PB (at test_hostile_specs.py:")
    assert "\n" not in outcome.error and "frame" not in outcome.error
