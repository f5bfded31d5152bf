"""The command line turns only user mistakes (`UserError`) into one line and exit 2; a bug keeps its
traceback and exits 1."""

from __future__ import annotations

import pytest

from depthwidth import cli
from depthwidth.errors import UserError
from depthwidth.shapes.shape import Shape
from depthwidth.study.schema import SpecError


def _run_raising(monkeypatch, capsys, exc: BaseException) -> tuple[int, str]:
    import depthwidth.cli.calc as calc

    def boom(args):
        raise exc

    monkeypatch.setattr(calc, "run", boom)
    code = cli.main(["calc", "--preset", "gpt2-small"])
    return code, capsys.readouterr().err


def test_user_error_is_one_line_exit_2(monkeypatch, capsys):
    code, err = _run_raising(monkeypatch, capsys, UserError("n_layers=0 must be a positive integer"))
    assert code == 2
    assert err == "depthwidth calc: error: n_layers=0 must be a positive integer\n"


@pytest.mark.parametrize("exc", [ValueError("math domain error"), KeyError("d_model"), TypeError("bad operand")])
def test_a_bug_keeps_its_traceback_and_exits_1(monkeypatch, capsys, exc):
    code, err = _run_raising(monkeypatch, capsys, exc)
    assert code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert type(exc).__name__ in err
    assert err.rstrip().endswith("please report it with the traceback above")


def test_validation_errors_are_user_errors():
    with pytest.raises(UserError, match="n_layers=0"):
        Shape(n_layers=0, d_model=64, n_heads=4, vocab_size=256)
    assert issubclass(SpecError, UserError) and issubclass(UserError, ValueError)
