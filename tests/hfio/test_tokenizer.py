"""Our tokenizers as `tokenizer.json`: `transformers.AutoTokenizer` reads the exported files and encodes
the validation text to exactly our ids (and decodes them to our text) for byte, char and the trained BPE."""

from __future__ import annotations

import numpy as np
import pytest

from depthwidth.data.tokenizers import ByteTokenizer, CharTokenizer
from depthwidth.hfio.tokenizer import byte_to_char, tokenizer_files

transformers = pytest.importorskip("transformers")


def _auto(tokenizer, folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in tokenizer_files(tokenizer, max_len=128).items():
        (folder / name).write_text(text, encoding="utf-8")
    return transformers.AutoTokenizer.from_pretrained(folder)


def test_the_byte_table_is_the_byte_level_alphabet():
    from tokenizers import pre_tokenizers

    table = byte_to_char()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert table[ord("A")] == "A" and table[ord(" ")] == "\u0120" and table[ord("\n")] == "\u010a"


@pytest.mark.parametrize("spec", ["byte", "char", "bpe:300"])
def test_auto_tokenizer_encodes_the_validation_text_to_our_ids(spec, corpus_file, tmp_path):
    from depthwidth.data.corpora import load_corpus
    from depthwidth.data.dataset import load_dataset, split_text

    dataset = load_dataset(corpus=str(corpus_file), tokenizer=spec, cache_dir=tmp_path / "cache")
    (train_text, val_text, _), = [split_text(s.text, val_fraction=0.1, test_fraction=0.0)
                                  for s in load_corpus(str(corpus_file)).slices]
    auto = _auto(dataset.tokenizer, tmp_path / "tok")
    ids = auto(val_text, add_special_tokens=False)["input_ids"]
    assert np.array_equal(np.asarray(ids), np.asarray(dataset.val, dtype=np.int64))
    assert len(ids) == len(dataset.val) > 500
    assert auto.decode(ids) == dataset.tokenizer.decode(dataset.val)
    assert len(auto) == dataset.vocab_size and auto.all_special_ids == []
    assert auto(train_text[:2000], add_special_tokens=False)["input_ids"] == dataset.tokenizer.encode(
        train_text[:2000]).tolist()


def test_char_unknowns_map_to_id_0_and_decode_as_ours(tmp_path):
    ours = CharTokenizer.train(["abc \n"])
    auto = _auto(ours, tmp_path / "a")
    text = "a b\ncz\u00e9!"  # z, é and ! were not training characters
    assert auto(text, add_special_tokens=False)["input_ids"] == ours.encode(text).tolist() == [3, 2, 4, 1, 5, 0, 0, 0]
    assert auto.decode(ours.encode(text).tolist()) == ours.decode(ours.encode(text)) == "a b\nc\ufffd\ufffd\ufffd"
    with_fffd = CharTokenizer.train(["ab\ufffd"])  # U+FFFD itself is a character: the unknown is spelled <unk>
    auto = _auto(with_fffd, tmp_path / "b")
    assert auto("a\ufffdq", add_special_tokens=False)["input_ids"] == with_fffd.encode("a\ufffdq").tolist() == [1, 3, 0]


def test_bytes_of_any_text_round_trip(tmp_path):
    auto = _auto(ByteTokenizer(), tmp_path / "b")
    text = "\x00\x01 tab\there \u00e9\u65e5\U0001f600 \r\n  "
    ids = auto(text, add_special_tokens=False)["input_ids"]
    assert ids == list(text.encode("utf-8"))
    assert auto.decode(ids) == text
