"""Compact shape strings: parsing, round trip with Shape.label(), and errors."""

import pytest

from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape_string import DEFAULT_BASE, parse_shape_string


def test_parse_basic_and_optional_tokens():
    s = parse_shape_string("L12-H768-A12")
    assert (s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.head_dim, s.d_ff) == (12, 768, 12, 12, 64, 3072)
    assert s.vocab_size == DEFAULT_BASE.vocab_size
    g = parse_shape_string("a32-kv8-h4096-l32-f14336", base=PRESETS["llama-2-7b"].shape)
    assert g == PRESETS["mistral-7b"].shape.with_(max_seq_len=4096)
    d = parse_shape_string("L24-H2048-A24-D128", base=PRESETS["gpt3-1.3b"].shape)
    assert d == PRESETS["gpt3-1.3b"].shape


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_label_round_trip(name):
    shape = PRESETS[name].shape
    text = shape.label()
    if shape.head_dim != shape.d_model // shape.n_heads or shape.d_model % shape.n_heads:
        text += f"-D{shape.head_dim}"
    assert parse_shape_string(text, base=shape) == shape


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("L12-H768", "lacks A"),
        ("L12-H768-A12-X3", "cannot read token 'X3'"),
        ("L12-L6-H768-A12", "L is given twice"),
        ("L0-H768-A12", "L0 must be a positive integer"),
        ("L12-H768-A5", "n_heads=5 does not divide d_model=768"),
        ("L12-H768-A12-KV5", "n_kv_heads=5 must divide n_heads=12"),
    ],
)
def test_errors(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_shape_string(text)
