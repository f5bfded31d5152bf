import pytest

from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex bad jugglers".split()


def make_text(n_words: int = 4000) -> str:
    """Deterministic pseudo-English (a fixed linear congruential walk over WORDS)."""
    out, x = [], 12345
    for i in range(n_words):
        x = (1103515245 * x + 12345) % 2**31
        out.append(WORDS[x % len(WORDS)] + ("\n" if i % 11 == 10 else " "))
    return "".join(out)


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(make_text())
    return path


@pytest.fixture
def tiny_shape():
    return Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)


@pytest.fixture
def tiny_config(corpus_file, tmp_path):
    return TrainConfig(corpus=str(corpus_file), seq_len=32, batch_size=4, steps=12, threads=1, eval_windows=8,
                       cache_dir=str(tmp_path / "cache"), peak_flops=1e11)
