"""Shape validation: every bad value raises a ValueError that names the field."""

import pytest

from depthwidth.shapes import Shape

BASE = dict(n_layers=2, d_model=64, n_heads=4, vocab_size=100)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"n_layers": 0}, "n_layers"),
        ({"d_model": -8}, "d_model"),
        ({"n_heads": 3}, "n_heads"),  # does not divide 64
        ({"n_kv_heads": 3}, "n_kv_heads"),  # does not divide 4
        ({"n_kv_heads": 8}, "n_kv_heads"),  # more kv heads than heads
        ({"vocab_size": 1.5}, "vocab_size"),
        ({"ffn": "tanh"}, "ffn"),
        ({"norm": "batchnorm"}, "norm"),
        ({"bias": "some"}, "bias"),
        ({"pos": "alibi"}, "pos"),
        ({"kind": "seq2seq"}, "kind"),
        ({"norm_position": "sandwich"}, "norm_position"),
        ({"d_ff": 0}, "d_ff"),
        ({"head_dim": 15, "pos": "rope"}, "head_dim"),
        ({"tie_embeddings": "yes"}, "tie_embeddings"),
        ({"parallel_residual": True, "norm_position": "post"}, "parallel_residual"),
        ({"max_seq_len": 0}, "max_seq_len"),
        ({"n_layers": True}, "n_layers"),
    ],
)
def test_invalid_values_name_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        Shape(**{**BASE, **change})


def test_defaults_are_resolved_to_concrete_numbers():
    s = Shape(**BASE)
    assert (s.head_dim, s.n_kv_heads, s.d_ff) == (16, 4, 256)
    assert s == Shape(**BASE, head_dim=16, n_kv_heads=4, d_ff=256)
    swiglu = Shape(**{**BASE, "d_model": 768, "n_heads": 12}, ffn="swiglu")
    assert swiglu.d_ff == 2048  # 8/3 * 768 = 2048 exactly, already a multiple of 64
    assert Shape(**BASE, ffn="swiglu").d_ff == 192  # 170.7 rounded up to a multiple of 64


def test_head_dim_may_differ_from_width_over_heads():
    s = Shape(**BASE, head_dim=32)
    assert s.q_dim == 128 and s.kv_dim == 128


def test_with_recomputes_derived_defaults_but_keeps_explicit_ones():
    s = Shape(**BASE)
    wide = s.with_(d_model=128)
    assert (wide.head_dim, wide.d_ff) == (32, 512)
    explicit = Shape(**BASE, d_ff=100).with_(d_model=128)
    assert explicit.d_ff == 100


def test_round_trip_and_unknown_fields():
    s = Shape(**BASE, n_kv_heads=2)
    assert Shape.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="n_layer"):
        Shape.from_dict({**BASE, "n_layer": 3})
    with pytest.raises(ValueError, match="incomplete"):
        Shape.from_dict({"n_layers": 3})


def test_label():
    assert Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=10).label() == "L12-H768-A12"
    assert Shape(**BASE, n_kv_heads=2, d_ff=100).label() == "L2-H64-A4-KV2-F100"
