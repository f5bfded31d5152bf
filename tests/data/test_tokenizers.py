import numpy as np
import pytest

from depthwidth.data import UNK_ID, BPETokenizer, ByteTokenizer, CharTokenizer, parse_tokenizer_spec, train_tokenizer
from depthwidth.data.tokenizers import tokenizer_from_state

TEXT = "Wherefore art thou, Romeo?\nDeny thy father — and refuse thy name. ü€\n" * 20


def test_byte_round_trip_and_values():
    tok = ByteTokenizer()
    ids = tok.encode(TEXT)
    assert tok.vocab_size == 256
    assert list(ids[:3]) == [ord("W"), ord("h"), ord("e")]
    assert len(ids) == len(TEXT.encode("utf-8"))
    assert tok.decode(ids) == TEXT


def test_char_vocab_from_training_text_and_unknowns():
    tok = CharTokenizer.train(["hello", "world"])
    assert tok.chars == "dehlorw"
    assert tok.vocab_size == 8  # 7 characters + the reserved unknown id
    assert list(tok.encode("hello")) == [3, 2, 4, 4, 5]
    assert tok.decode(tok.encode("world")) == "world"
    ids = tok.encode("help!")
    assert list(ids) == [3, 2, 4, UNK_ID, UNK_ID]
    assert tok.decode(ids) == "hel\ufffd\ufffd"
    assert tokenizer_from_state(tok.state()).encode("low").tolist() == tok.encode("low").tolist()


def test_char_round_trip_with_non_ascii():
    tok = train_tokenizer("char", [TEXT])
    assert tok.decode(tok.encode(TEXT)) == TEXT
    assert tok.vocab_size == len(set(TEXT)) + 1


def test_bpe_round_trip_and_deterministic_training():
    a = train_tokenizer("bpe:300", [TEXT])
    b = train_tokenizer("bpe:300", [TEXT])
    assert isinstance(a, BPETokenizer)
    assert a.fingerprint == b.fingerprint
    assert 256 < a.vocab_size <= 300
    ids = a.encode(TEXT)
    assert len(ids) < len(TEXT.encode("utf-8")) / 2  # the repeated line is merged
    assert a.decode(ids) == TEXT
    assert ids.dtype == np.uint16
    assert tokenizer_from_state(a.state()).encode(TEXT).tolist() == ids.tolist()


@pytest.mark.parametrize("spec", ["wordpiece", "bpe", "bpe:100", "bpe:x", "", "Byte"])
def test_unknown_tokenizer_names_are_refused(spec):
    with pytest.raises(ValueError, match="tokenizer="):
        parse_tokenizer_spec(spec)


def test_known_specs_parse():
    assert parse_tokenizer_spec("byte") == ("byte", None)
    assert parse_tokenizer_spec("char") == ("char", None)
    assert parse_tokenizer_spec("bpe:4096") == ("bpe", 4096)
