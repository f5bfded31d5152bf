"""Shared by the Hugging Face folder tests: nothing is downloaded (transformers runs offline and reads
local folders only), and a small English corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

#: characters of the test corpus: its 10% validation tail stays below one BPE encoding chunk (4096)
CORPUS_CHARS = 30_000


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> Path:
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("hf-corpus") / "topics.txt"
    path.write_text("".join(topics[k] for k in sorted(topics))[:CORPUS_CHARS], encoding="utf-8")
    return path
