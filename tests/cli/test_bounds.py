"""The repeat counts of `report`, `recommend` and the explorer's study fields are bounded
(`depthwidth.report.limits.LIMITS`): an absurd count is one line naming the flag, the bound and its reason,
exit 2, at once and with nothing written - never a command that runs for ever."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from depthwidth.report.limits import LIMITS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

from fixture_study import build_fixture_study  # noqa: E402


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The report tests' synthetic study (`tests/report/fixture_study.py`)."""
    folder = tmp_path_factory.mktemp("bounds-study")
    build_fixture_study(folder)
    return folder


def _timed_error(cli_error, argv):
    start = time.perf_counter()
    line = cli_error(argv)
    return line, time.perf_counter() - start


@pytest.mark.parametrize("argv, flag, bound", [
    (["recommend", "{study}", "--bootstrap", "1000000000"], "--bootstrap", LIMITS["bootstrap"][0]),
    (["recommend", "{study}", "--target-params", "1M", "--bootstrap", "1000000000"], "--bootstrap",
     LIMITS["bootstrap"][0]),
    (["recommend", "{study}", "--target-params", "1M", "--splits", "1000000000"], "--splits", LIMITS["splits"][0]),
    (["report", "{study}", "--bootstrap", str(10**9)], "--bootstrap", LIMITS["bootstrap"][0]),
    (["report", "{study}", "--bootstrap", str(10**400)], "--bootstrap", LIMITS["bootstrap"][0]),
])
@pytest.mark.timeout(30)
def test_an_absurd_count_is_one_line_at_once(study, cli_error, argv, flag, bound):
    argv = [a.format(study=study) for a in argv]
    before = sorted(p.name for p in study.iterdir())
    line, seconds = _timed_error(cli_error, argv)
    assert seconds < 1.0, seconds
    assert f"argument {flag}: " in line and f"above the limit of {bound:,}" in line, line
    name = flag.removeprefix("--")
    assert LIMITS[name][1] in line  # the reason, in the message
    assert sorted(p.name for p in study.iterdir()) == before  # no report folder, nothing else


@pytest.mark.parametrize("argv, expected", [
    (["report", "{study}", "--bootstrap", "0"], "argument --bootstrap: 0 is below 1"),
    (["recommend", "{study}", "--bootstrap", "-1"], "argument --bootstrap: -1 is below 0"),
    (["recommend", "{study}", "--splits", "0"], "argument --splits: 0 is below 1"),
    (["recommend", "{study}", "--splits", "many"], "argument --splits: 'many' is not a whole number"),
])
def test_a_count_below_its_minimum_is_one_line(study, cli_error, argv, expected):
    assert expected in cli_error([a.format(study=study) for a in argv])


def test_the_bounds_themselves_are_accepted():
    from depthwidth.cli import build_parser

    parser = build_parser()
    most_b, most_s = LIMITS["bootstrap"][0], LIMITS["splits"][0]
    args = parser.parse_args(["recommend", "S", "--bootstrap", str(most_b), "--splits", str(most_s)])
    assert (args.bootstrap, args.splits) == (most_b, most_s)
    assert parser.parse_args(["recommend", "S", "--bootstrap", "0"]).bootstrap == 0
    assert parser.parse_args(["report", "S", "--bootstrap", str(most_b)]).bootstrap == most_b


def test_every_bound_states_its_reason():
    for name, (most, why) in LIMITS.items():
        assert isinstance(most, int) and most > 0 and len(why) > 20, name


def test_the_explorer_fields_obey_the_same_bounds():
    """The page's bootstrap and splits are recommend's flags, read by recommend's own parser."""
    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore.fields import STUDY_DEFAULTS, BadRequest, argv_of

    commands = CliCommands()
    for name in ("bootstrap", "splits"):
        assert 0 <= int(STUDY_DEFAULTS[name]) <= LIMITS[name][0]
        commands.check("recommend", argv_of({name: STUDY_DEFAULTS[name]}, "recommend"))
        with pytest.raises(BadRequest) as caught:
            commands.check("recommend", argv_of({name: "1000000000"}, "recommend"))
        assert caught.value.field == name
        assert f"above the limit of {LIMITS[name][0]:,}" in caught.value.message
        assert f"argument --{name}:" in caught.value.message


@pytest.mark.parametrize("length", [300, 5000, 100_000])
def test_a_huge_hardware_name_is_one_short_line(cli_error, length):
    line = cli_error(["plan", "--params", "1M", "--hardware", "q" * length])
    assert len(line) < 500 and f"({length + 2:,} characters): not a hardware name" in line  # its repr's length
