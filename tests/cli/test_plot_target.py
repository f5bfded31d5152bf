"""`plan --plot PATH` that cannot be written: one line naming the path, exit 2, nothing written (no folder
left behind either); a writable path, missing folders included, is drawn as before."""

from __future__ import annotations

import errno
import os
import time

import pytest


def _plan(path) -> list[str]:
    return ["plan", "--params", "124M", "--plot", str(path)]


def _fast(cli_error, argv) -> str:
    start = time.perf_counter()
    line = cli_error(argv)
    assert time.perf_counter() - start < 1.0
    return line


def test_a_path_through_a_file_is_named(cli_error, tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    for target in (tmp_path / "notes.txt" / "x.png", tmp_path / "notes.txt" / "a" / "x.png"):
        line = _fast(cli_error, _plan(target))
        assert line == f"depthwidth plan: error: --plot {target}: {tmp_path / 'notes.txt'} is not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_folder_is_named(cli_error, tmp_path):
    (tmp_path / "x.png").mkdir()
    assert f"--plot {tmp_path / 'x.png'}: is a folder" in _fast(cli_error, _plan(tmp_path / "x.png"))


def test_an_unwritable_folder_is_named(cli_error, tmp_path, monkeypatch):
    """A folder this process may not write in (read-only, or another user's): refused before planning."""
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(tmp_path) else real(p, mode, **kw))
    target = tmp_path / "sub" / "x.png"
    line = _fast(cli_error, _plan(target))
    assert line == f"depthwidth plan: error: --plot {target}: cannot write the plot (the folder {tmp_path} is not " \
                   "writable)"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_named(cli_error, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    assert f"--plot {ro / 'x.png'}: cannot write the plot" in _fast(cli_error, _plan(ro / "x.png"))
    assert list(ro.iterdir()) == []


def test_a_failing_write_names_the_path_and_leaves_nothing(cli_error, tmp_path, monkeypatch):
    """A write that fails midway (a read-only filesystem, a full disk): the temporary file and any folder
    made for the plot are removed."""
    from matplotlib.figure import Figure

    def fail(self, fname, **kw):
        with open(fname, "wb") as fh:
            fh.write(b"half")
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(fname))

    monkeypatch.setattr(Figure, "savefig", fail)
    target = tmp_path / "new" / "deeper" / "x.png"
    line = cli_error(_plan(target))
    assert line == f"depthwidth plan: error: --plot {target}: cannot write the plot (Read-only file system)"
    assert list(tmp_path.iterdir()) == []


def test_a_writable_path_is_drawn(tmp_path, capsys):
    from depthwidth.cli import main

    target = tmp_path / "new" / "family.svg"
    assert main(_plan(target)) == 0
    assert target.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert sorted(p.name for p in target.parent.iterdir()) == ["family.svg"]  # no temporary file left
    assert f"plot: {target}" in capsys.readouterr().out
