import os

import numpy as np
import pytest

from depthwidth.data import dataset as dataset_mod
from depthwidth.data import load_dataset, split_text
from depthwidth.data.corpora import DOCUMENT_SEPARATOR


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_split_rule_contiguous_tail():
    text = "".join(chr(65 + i % 26) for i in range(1000))
    train, val, test = split_text(text, val_fraction=0.1, test_fraction=0.05)
    assert (len(train), len(val), len(test)) == (850, 100, 50)
    assert train + val + test == text
    assert split_text(text, val_fraction=0.1, test_fraction=0.0) == (text[:900], text[900:], "")


def test_each_slice_of_a_mixture_is_split_on_its_own(tmp_path):
    folder_a = tmp_path / "prose"
    folder_a.mkdir()
    _write(folder_a, "a.txt", "a" * 900 + "A" * 100)
    folder_b = tmp_path / "code"
    folder_b.mkdir()
    _write(folder_b, "b.py", "b" * 180 + "B" * 20)
    ds = load_dataset(corpus=f"{folder_a}+{folder_b}", tokenizer="byte", val_fraction=0.1,
                      cache_dir=tmp_path / "cache")
    assert [s.name for s in ds.slices] == ["prose", "code"]
    a, b = ds.slices
    assert a.train == (0, 900) and b.train == (900, 1080)
    assert a.val == (0, 100) and b.val == (100, 120)
    assert ds.tokenizer.decode(ds.val[slice(*a.val)]) == "A" * 100
    assert ds.tokenizer.decode(ds.val[slice(*b.val)]) == "B" * 20
    assert len(ds.test) == 0


def test_char_vocabulary_comes_from_the_training_split_only(tmp_path):
    path = _write(tmp_path, "t.txt", "abab" * 45 + "xyz" * 10)  # 180 + 30 chars; the tail is val
    ds = load_dataset(corpus=path, tokenizer="char", val_fraction=30 / 210, cache_dir=tmp_path / "c")
    assert ds.tokenizer.chars == "ab"
    assert ds.vocab_size == 3
    assert set(np.asarray(ds.val).tolist()) == {0}  # x, y, z are unknown: id 0
    assert ds.unknown_tokens == {"train": 0, "val": 30, "test": 0}


def test_cache_reused_keyed_by_tokenizer_and_written_atomically(tmp_path, monkeypatch):
    path = _write(tmp_path, "t.txt", "hello world\n" * 100)
    cache = tmp_path / "cache"
    first = load_dataset(corpus=path, tokenizer="char", cache_dir=cache)
    calls, build = [], dataset_mod._build
    monkeypatch.setattr(dataset_mod, "_build", lambda *a, **k: (calls.append(1), build(*a, **k)))
    again = load_dataset(corpus=path, tokenizer="char", cache_dir=cache)
    assert calls == []
    assert again.cache_path == first.cache_path
    assert isinstance(again.train, np.memmap)
    np.testing.assert_array_equal(again.train, first.train)
    assert again.dataset_hash == first.dataset_hash
    load_dataset(corpus=path, tokenizer="byte", cache_dir=cache)
    assert calls == [1]  # another tokenizer is another cache entry
    entries = os.listdir(cache / "tokens")
    assert not [e for e in entries if e.startswith(".")]  # no temporary folders left


def test_incomplete_cache_folder_is_rebuilt(tmp_path):
    path = _write(tmp_path, "t.txt", "hello world\n" * 100)
    ds = load_dataset(corpus=path, cache_dir=tmp_path / "c")
    os.remove(os.path.join(ds.cache_path, "meta.json"))
    again = load_dataset(corpus=path, cache_dir=tmp_path / "c")
    np.testing.assert_array_equal(again.train, ds.train)


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    path = _write(tmp_path, "t.txt", "hello world\n" * 10)
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "envcache"))
    ds = load_dataset(corpus=path)
    assert ds.cache_path.startswith(str(tmp_path / "envcache"))


def test_dataset_hash_changes_with_content_tokenizer_and_split(tmp_path):
    path = _write(tmp_path, "t.txt", "hello world\n" * 100)
    c = tmp_path / "c"
    base = load_dataset(corpus=path, cache_dir=c).dataset_hash
    assert load_dataset(corpus=path, tokenizer="char", cache_dir=c).dataset_hash != base
    assert load_dataset(corpus=path, val_fraction=0.2, cache_dir=c).dataset_hash != base
    path.write_text("hello world\n" * 101)
    assert load_dataset(corpus=path, cache_dir=c).dataset_hash != base


def test_documents_joined_with_separator(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    _write(folder, "1.txt", "one")
    _write(folder, "2.txt", "two" * 20)
    ds = load_dataset(corpus=folder, val_fraction=0.01, cache_dir=tmp_path / "c")
    assert ds.tokenizer.decode(ds.train[:5]) == "one" + DOCUMENT_SEPARATOR


@pytest.mark.parametrize("val, test", [(0.0, 0.0), (1.2, 0.0), (0.3, 0.3), (0.1, -0.1)])
def test_bad_fractions(tmp_path, val, test):
    path = _write(tmp_path, "t.txt", "x" * 100)
    with pytest.raises(ValueError, match="fraction"):
        load_dataset(corpus=path, val_fraction=val, test_fraction=test, cache_dir=tmp_path / "c")
