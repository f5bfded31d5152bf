"""Inputs that once gave a traceback, a misleading message or several lines: each is now one line and
exit 2 (or a correct result). One test per case of the hardening issue; the fuzz suite (tests/fuzz)
keeps the rest of the input space honest."""

from __future__ import annotations

import errno
import json
import os
import sqlite3

import pytest

from depthwidth import cli


@pytest.mark.parametrize("model_type", [["llama"], {"name": "llama"}, 7])
@pytest.mark.parametrize("command", [["calc"], ["train", "--steps", "1"], ["bench"]])
def test_hf_model_type_of_the_wrong_type(tmp_path, cli_error, model_type, command):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "num_hidden_layers": 2}))
    err = cli_error([*command, "--hf", str(path)])
    assert f"{path}: field 'model_type' = {model_type!r} must be a string" in err
    assert "supported model types: gpt2, gpt_neox, llama, mistral, qwen2" in err


def test_train_out_below_a_file_and_cache_dir_a_file(tmp_path, cli_error):
    file = tmp_path / "file.txt"
    file.write_text("not a folder")
    base = ["train", "--shape", "L1-H8-A1", "--steps", "1", "--seq-len", "8", "--batch-size", "2"]
    assert cli_error([*base, "--out", f"{file}/sub"]) == \
        f"depthwidth train: error: {file}/sub: Not a directory"
    err = cli_error([*base, "--cache-dir", str(file)])
    assert err.startswith(f"depthwidth train: error: {file}") and "Not a directory" in err


@pytest.mark.parametrize("exc, line", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/run"), "/data/run: No space left on device"),
    (FileExistsError(errno.EEXIST, "File exists", "a", None, "b"), "a -> b: File exists"),
    (ConnectionRefusedError("could not reach the cluster"), "could not reach the cluster"),
    (sqlite3.DatabaseError("database disk image is malformed"),
     "study store: DatabaseError: database disk image is malformed (a damaged study.sqlite is rebuilt by "
     "`depthwidth study repair DIR`)"),
    (sqlite3.OperationalError("database is locked"), "study store: OperationalError: database is locked"),
])
def test_every_os_and_sqlite_error_is_one_line(monkeypatch, cli_error, exc, line):
    import depthwidth.cli.calc as calc

    def boom(args):
        raise exc

    monkeypatch.setattr(calc, "run", boom)
    assert cli_error(["calc", "--preset", "gpt2-small"]).startswith(f"depthwidth calc: error: {line}")


@pytest.mark.parametrize("exc", [sqlite3.ProgrammingError("Cannot operate on a closed database."),
                                 sqlite3.InterfaceError("bad parameter")])
def test_a_misuse_of_sqlite_is_still_a_bug(monkeypatch, capsys, exc):
    import depthwidth.cli.calc as calc

    def boom(args):
        raise exc

    monkeypatch.setattr(calc, "run", boom)
    assert cli.main(["calc", "--preset", "gpt2-small"]) == 1
    assert capsys.readouterr().err.startswith("Traceback (most recent call last):")


def test_unknown_command_is_one_line(cli_error):
    err = cli_error(["nosuchcommand"])
    assert err.startswith("depthwidth: error: argument COMMAND: invalid choice: 'nosuchcommand'")
    assert "usage:" not in err


@pytest.mark.parametrize("argv, line", [
    (["plan", "--params", "-5M"], "argument --params: -5M must be positive"),
    (["plan", "--flops", "-1e19", "--tokens", "1e9"], "argument --flops: -1e19 must be positive"),
    (["train", "--lr", "-1e-3", "--steps", "1"], "--lr: lr=-0.001 must be a finite number > 0"),
    (["calc", "--preset", "gpt2-small", "--batch", "-4"], "argument --batch: -4 must be a positive integer"),
])
def test_negative_numbers_reach_their_flag(cli_error, argv, line):
    err = cli_error(argv)
    assert line in err and "expected one argument" not in err


@pytest.mark.parametrize("argv, line", [
    (["plan", "--params", "1e400"], "argument --params: 1e400 is beyond 1e+30"),
    (["plan", "--params", "inf"], "argument --params: 'inf' is not an amount"),
    (["calc", "--preset", "llama-2-7b", "--rope-theta", "inf"], "argument --rope-theta: inf is not a finite number"),
    (["calc", "--preset", "llama-2-7b", "--rope-theta", "1e400"],
     "argument --rope-theta: 1e400 is not a finite number"),
    (["calc", "--preset", "llama-2-7b", "--rope-theta", "1e15"],
     "rope_theta=1000000000000000.0 is above the limit of 1e+12"),
])
def test_infinity_and_overflow_are_refused_when_parsed(cli_error, argv, line):
    assert line in cli_error(argv)


def test_hf_config_that_is_not_a_regular_file(cli_error, tmp_path):
    assert cli_error(["calc", "--hf", "/dev/null"]) == \
        "depthwidth calc: error: /dev/null: a character device, not a regular file; expected a config file"
    os.mkfifo(tmp_path / "fifo.json")  # never opened for a blocking read: no hang
    assert cli_error(["calc", "--hf", str(tmp_path / "fifo.json")]) == \
        f"depthwidth calc: error: {tmp_path / 'fifo.json'}: a FIFO (named pipe), not a regular file; expected a " \
        "config file"
    assert cli_error(["calc", "--hf", str(tmp_path / "none.json")]) == \
        f"depthwidth calc: error: {tmp_path / 'none.json'}: no such config file"


def test_plan_kv_group_keeps_its_ratio(capsys):
    assert cli.main(["plan", "--params", "124M", "--kv-group", "7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    members = [m["shape"] for m in data["members"]]
    assert len(members) >= 2
    for shape in members:
        assert shape["n_heads"] % 7 == 0 and shape["n_heads"] // shape["n_kv_heads"] == 7
        assert shape["d_model"] % 448 == 0  # heads of 64 in whole groups of 7


def test_plan_kv_group_with_given_widths_drops_what_does_not_split(capsys):
    assert cli.main(["plan", "--params", "124M", "--kv-group", "3", "--widths", "768,1024", "--json",
                     "--tolerance", "0.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["shape"]["d_model"] for m in data["members"]] == [768]  # 12 heads split into 4 groups of 3
    reasons = [d["reason"] for d in data["family"]["dropped"]]
    assert any("width 1024 has 16 heads, not a multiple of the kv group 3" in r for r in reasons)


@pytest.mark.parametrize("argv, shown", [
    (["probe", "show", "multihop", "\x1e"], "unrecognized arguments: \\x1e"),
    (["calc", "--hf", "a\nb.json"], "a\\nb.json: no such config file"),
    (["calc", "--preset", "gpt2\u202esmall"], "gpt2\\u202esmall"),
])
def test_control_characters_of_the_input_are_escaped_in_the_one_line(cli_error, argv, shown):
    assert shown in cli_error(argv)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_as_training_data_is_never_read(cli_error, device):
    assert cli_error(["train", "--data", device, "--shape", "L1-H8-A1", "--steps", "1"]) == \
        f"depthwidth train: error: data {device} is neither a regular file nor a folder; give a text file or a " \
        "folder of them"
