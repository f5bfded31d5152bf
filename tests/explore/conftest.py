"""Fixtures of the explorer's tests: the report tests' synthetic study (written with the study store's own API,
`tests/report/fixture_study.py`), an explorer served on a free loopback port in a thread of this process, and
`cli_json`, the command line's JSON run in this process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))

from explore_helpers import serve  # noqa: E402
from fixture_study import build_fixture_study  # noqa: E402


@pytest.fixture(scope="session")
def explore_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("explore-study")
    build_fixture_study(folder)
    return folder


@pytest.fixture(scope="session")
def explorer(explore_study):
    from depthwidth.cli.explore import CliCommands
    from depthwidth.explore import Explorer, StudySource

    return Explorer(CliCommands(), studies=[StudySource(folder=str(explore_study))], version="test")


@pytest.fixture(scope="session")
def base_url(explorer):
    server, url = serve(explorer)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture
def cli_json(capsys):
    """`cli_json(argv)`: what `depthwidth ARGV` prints as JSON (run in this process), its exit status checked."""
    from depthwidth.cli import main

    def run(argv: list[str], *, status: int = 0):
        code = main(list(argv))
        out = capsys.readouterr().out
        assert code == status, out
        return json.loads(out)

    return run
