"""A hardware profile path that is there but no regular file (a named pipe, a link to /dev/zero, a socket, a
folder) is named as what it is, in one line and at once, wherever a hardware argument is read; a missing one
is still "no hardware profile at ...". The profile itself is read through the checked reader."""

from __future__ import annotations

import os
import re
import socket
import time

import pytest

from depthwidth.errors import UserError
from depthwidth.machine.profile import load_profile
from depthwidth.machine.resolve import hardware_choice

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def odd(tmp_path):
    """name -> (path, what it is)."""
    os.mkfifo(tmp_path / "pipe.json")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "folder.json").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.json"))
    yield {"pipe.json": "a FIFO (named pipe)", "pipe": "a FIFO (named pipe)", "zero.json": "a character device",
           "folder.json": "a folder", "sock.json": "a socket"}
    sock.close()


def test_the_cli_names_what_the_path_is(cli_error, tmp_path, odd):
    for name, kind in odd.items():
        path = tmp_path / name
        start = time.perf_counter()
        line = cli_error(["plan", "--params", "124M", "--hardware", str(path)])
        assert time.perf_counter() - start < 1.0
        assert f"--hardware: {path}" in line and f"is {kind}, not a regular file" in line, line
        assert "no hardware profile at" not in line
    assert "(a link to /dev/zero)" in cli_error(["plan", "--params", "124M", "--hardware", str(tmp_path / "zero.json")])


def test_a_missing_profile_is_still_missing(cli_error, tmp_path):
    line = cli_error(["plan", "--params", "124M", "--hardware", str(tmp_path / "none.json")])
    assert f"--hardware: no hardware profile at {tmp_path / 'none.json'}; run `depthwidth hw measure" in line


def test_the_library_readers_refuse_without_blocking(tmp_path, odd):
    for name, kind in odd.items():
        with pytest.raises(UserError, match=f"is {re.escape(kind)}, not a regular file"):
            hardware_choice(str(tmp_path / name), argument="hardware")
        start = time.perf_counter()
        with pytest.raises(UserError, match="not a regular file; expected a hardware profile file"):
            load_profile(tmp_path / name)  # past the argument's check: the reader's own, on the descriptor
        assert time.perf_counter() - start < 1.0
    with pytest.raises(FileNotFoundError, match="no hardware profile at"):
        load_profile(tmp_path / "none.json")
