"""The suite's own limits: every test runs under pytest-timeout's per-test limit (pyproject), `slow` tests
under the longer SLOW_TEST_TIMEOUT_S, so one hung test fails alone and the rest of the suite still runs."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]


def _root_conftest():
    """tests/conftest.py itself (`import conftest` would find whichever conftest was imported first)."""
    spec = importlib.util.spec_from_file_location("depthwidth_root_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SLOW_TEST_TIMEOUT_S = _root_conftest().SLOW_TEST_TIMEOUT_S


def test_every_test_has_a_limit_well_under_the_ci_budget(request):
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert 60 <= ini["timeout"] <= 600
    assert float(request.config.getini("timeout")) == ini["timeout"]
    assert ini["timeout"] < SLOW_TEST_TIMEOUT_S <= 3600


def test_a_hung_test_fails_alone_and_the_others_still_run(pytester):
    pytester.makepyfile(test_hang="""
        import time
        def test_hangs():
            time.sleep(30)
        def test_after():
            assert 1 + 1 == 2
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "timeout=1", "-q")
    result.assert_outcomes(passed=1, failed=1)
    assert "Timeout" in result.stdout.str()


@pytest.mark.slow
def test_a_slow_test_gets_the_longer_limit(request):
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (SLOW_TEST_TIMEOUT_S,)
