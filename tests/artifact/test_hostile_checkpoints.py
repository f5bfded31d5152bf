"""Checkpoints that are not regular files, and checkpoints of another format: `inspect`, `export`, `bench`
and a resume end in one line naming what the file is, at once (a named pipe never blocks the reader), and
write nothing. The checked open (`files.open_regular`, `files.pinned_path`) reads the very file it checked."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from depthwidth.artifact.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, write_checkpoint
from depthwidth.errors import UserError
from depthwidth.files import open_regular, pinned_path

pytestmark = pytest.mark.timeout(60)  # a regression here is a hang: fail it in a minute, not at the suite's limit


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "ck.pt"
    os.mkfifo(path)
    return path


@pytest.fixture
def pipe_run(tmp_path):
    """A run folder whose checkpoint.pt is a named pipe."""
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "checkpoint.pt")
    return run


def _payload(**changes):
    payload = {"format": CHECKPOINT_FORMAT, "model": {"w": torch.ones(2)}, "optimizer": {},
               "rng": {"cpu": torch.get_rng_state()}, "meta": '{"step": 3}'}
    payload.update(changes)
    return payload


def _fast(cli_error, argv, *, seconds: float = 1.0) -> str:
    start = time.perf_counter()
    line = cli_error(argv)
    took = time.perf_counter() - start
    assert took < seconds, took
    return line


@pytest.mark.parametrize("command", [["inspect"], ["export", "-o", "{out}"], ["bench", "--checkpoint"]])
def test_a_named_pipe_as_a_checkpoint_is_one_line(cli_error, fifo, tmp_path, command):
    out = tmp_path / "out"
    argv = [a.format(out=out) for a in command]
    argv = [*argv[:1], str(fifo), *argv[1:]] if command[0] != "bench" else [*argv, str(fifo)]
    line = _fast(cli_error, argv)
    assert f"checkpoint {fifo} is a FIFO (named pipe), not a regular file" in line, line
    assert not out.exists()


@pytest.mark.parametrize("command", ["inspect", "export"])
def test_a_run_folder_whose_checkpoint_is_a_pipe_says_so(cli_error, pipe_run, tmp_path, command):
    out = tmp_path / "out"
    argv = [command, str(pipe_run)] + (["-o", str(out)] if command == "export" else [])
    line = _fast(cli_error, argv)
    assert f"run folder {pipe_run}: its checkpoint.pt is a FIFO (named pipe), not a regular file" in line, line
    assert "without checkpoint.pt" not in line
    assert not out.exists()


def test_a_pipe_checkpoint_beside_a_config_is_a_run_folder_to_bench(cli_error, pipe_run):
    """With a config.json beside it, a checkpoint.pt that is a pipe still makes the folder a run folder: the
    bench names the pipe instead of reading the folder as a Hugging Face model."""
    (pipe_run / "config.json").write_text("{}")
    line = _fast(cli_error, ["bench", "--checkpoint", str(pipe_run)])
    assert f"run folder {pipe_run}: its checkpoint.pt is a FIFO (named pipe)" in line, line


def test_a_link_to_a_device_and_a_folder_as_checkpoints(cli_error, tmp_path):
    zero = tmp_path / "zero.pt"
    zero.symlink_to("/dev/zero")
    assert "is a character device, not a regular file" in _fast(cli_error, ["inspect", str(zero)])
    folder = tmp_path / "run"
    (folder / "checkpoint.pt").mkdir(parents=True)
    assert "its checkpoint.pt is a folder, not a regular file" in _fast(cli_error, ["inspect", str(folder)])
    broken = tmp_path / "broken.pt"
    broken.symlink_to(tmp_path / "nowhere.pt")
    assert f"checkpoint {broken} does not exist (a broken symbolic link)" in _fast(cli_error, ["inspect", str(broken)])


def test_a_resume_reader_refuses_a_pipe_without_blocking(fifo):
    """`load_checkpoint` (the trainer's resume, `study export`) opens through the checked reader too."""
    start = time.perf_counter()
    with pytest.raises(UserError, match=r"ck.pt: a FIFO \(named pipe\), not a regular file; expected a checkpoint"):
        load_checkpoint(fifo)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("fmt, shown", [(99, "99"), (0, "0"), ("1", "'1'"), (True, "True"), (1.0, "1.0"),
                                        ("x" * 500, "'xxxxxxxx")])
def test_another_format_is_named(tmp_path, fmt, shown):
    path = tmp_path / "ck.pt"
    torch.save(_payload(format=fmt), path)
    with pytest.raises(UserError) as caught:
        load_checkpoint(path)
    line = str(caught.value)
    assert f"is of checkpoint format {shown}" in line and f"reads format {CHECKPOINT_FORMAT} only" in line, line
    assert "(format 1)" not in line and len(line) < 300


def test_a_format_99_checkpoint_is_one_line_from_inspect_and_export(cli_error, tmp_path):
    path = tmp_path / "ck.pt"
    torch.save(_payload(format=99), path)
    for argv in (["inspect", str(path)], ["export", str(path), "-o", str(tmp_path / "out")]):
        line = _fast(cli_error, argv)
        assert f"checkpoint {path} is of checkpoint format 99; this version of depthwidth reads format 1 only" in line
    assert not (tmp_path / "out").exists()


def test_no_format_at_all(tmp_path):
    path = tmp_path / "ck.pt"
    torch.save({"weights": torch.ones(2)}, path)
    with pytest.raises(UserError, match=r"not a depthwidth checkpoint \(no format recorded; this version reads "
                                        r"checkpoint format 1\)"):
        load_checkpoint(path)


def test_zip_and_legacy_checkpoints_still_load(tmp_path):
    path = tmp_path / "ck.pt"
    write_checkpoint(path, model_state={"w": torch.arange(4.0)}, optimizer_state={}, rng={"cpu": torch.get_rng_state()},
                     meta={"step": 7})
    payload = load_checkpoint(path)
    assert payload["meta"] == {"step": 7} and torch.equal(payload["model"]["w"], torch.arange(4.0))
    legacy = tmp_path / "legacy.pt"
    torch.save(_payload(), legacy, _use_new_zipfile_serialization=False)
    assert legacy.read_bytes()[:4] != b"PK\x03\x04"
    assert load_checkpoint(legacy)["meta"] == {"step": 3}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc/self/fd on this system")
def test_the_checked_file_is_the_file_read(tmp_path):
    """A file put in the checked one's place after the check is never read: the pinned path opens the
    descriptor's own file."""
    path = tmp_path / "ck.pt"
    torch.save({"which": torch.tensor([1])}, path)
    other = tmp_path / "other.pt"
    torch.save({"which": torch.tensor([2])}, other)
    with open_regular(path, what="checkpoint") as fh:
        os.replace(other, path)
        data = torch.load(pinned_path(fh), weights_only=True, mmap=True)
    assert data["which"].item() == 1
    assert torch.load(path, weights_only=True)["which"].item() == 2
