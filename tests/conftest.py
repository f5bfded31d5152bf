"""Suite-wide settings: tiny models run fastest on one thread (two threads on a busy two-core machine
cost far more in synchronisation than they gain), every test gets its own cache folder, nothing is
downloaded (transformers and datasets run offline and read local folders only), and a small English
corpus for the tests that need real text."""

import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

#: characters of the test corpus: its 10% validation tail stays below one BPE encoding chunk (4096)
CORPUS_CHARS = 30_000

#: per-test limit of a `slow` test without its own @pytest.mark.timeout (the default test's is pyproject's)
SLOW_TEST_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "depthwidth-cache"))


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    """Python's own help topics (an installed package, nothing downloaded), CORPUS_CHARS of them."""
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("hf-corpus") / "topics.txt"
    path.write_text("".join(topics[k] for k in sorted(topics))[:CORPUS_CHARS], encoding="utf-8")
    return path


@pytest.fixture
def cli_error(capsys):
    """`cli_error(argv)`: run `depthwidth ARGV` in this process, assert exit 2 with exactly one line on
    stderr and no traceback, and return that line (a usage error's SystemExit included)."""
    from depthwidth import cli

    def run(argv: list[str]) -> str:
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # a usage error: argparse exits (the `depthwidth` script's status)
            code = exc.code
        err = capsys.readouterr().err
        assert code == 2, err
        assert len(err.splitlines()) == 1 and err.endswith("\n") and "Traceback" not in err, err
        return err.strip()

    return run
