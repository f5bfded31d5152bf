"""Shared by the Hugging Face interchange tests: tiny runs trained by our trainer (offline settings and
the corpus come from tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


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
