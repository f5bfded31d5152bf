"""Shared by the Hugging Face interchange tests: nothing is downloaded (transformers and datasets run
offline and read local folders only), a small English corpus, and tiny runs trained by our trainer."""

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


def train_run(folder: Path, shape, *, corpus: Path | str, tokenizer: str = "byte", steps: int = 8,
              seq_len: int = 32, **changes):
    """Train `shape` for a few steps into `folder` with our trainer (token cache beside it, as module
    fixtures run outside the per-test cache folder); returns the TrainResult."""
    from depthwidth.artifact.config import TrainConfig
    from depthwidth.train.loop import train

    config = TrainConfig(corpus=str(corpus), tokenizer=tokenizer, seq_len=seq_len, batch_size=4, steps=steps,
                         lr=3e-3, threads=1, eval_windows=4, peak_flops=1e11,
                         cache_dir=str(folder.parent / "cache"), **changes)
    return train(shape, config, out_dir=folder)


@pytest.fixture(scope="session")
def trainer():
    """`train_run` (test folders are not packages, so tests take it as a fixture)."""
    return train_run
