"""Op names: one set shared by the op inventory (`layer_ops`) and the latency model, which knows every
op the inventory can produce and raises on any other instead of treating it as unsplit."""

import pytest

from depthwidth.shapes import latency
from depthwidth.shapes.flops import Op, layer_ops
from depthwidth.shapes.latency import TP_SPLIT, predict_decode, predict_forward, tp_split
from depthwidth.shapes.ops import (
    ATTENTION,
    ATTN_SCORES,
    ATTN_SOFTMAX,
    ATTN_VALUES,
    BLOCK_OPS,
    FINAL_NORM,
    HEAD_OPS,
    LM_HEAD,
    MLP_DOWN,
    OP_NAMES,
    check_op_name,
)
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape

GPT2 = Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50304)
VARIANTS = {
    "gpt2": GPT2,
    "swiglu-gqa-rope": Shape(n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, ffn="swiglu", norm="rmsnorm",
                             pos="rope", vocab_size=50, tie_embeddings=False),
    "no-final-norm": Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=40, final_norm=False),
    "encoder-no-head": Shape(n_layers=2, d_model=32, n_heads=4, kind="encoder", norm_position="post",
                             final_norm=False, lm_head=False, pos="none", vocab_size=30),
    **{f"preset-{name}": preset.shape for name, preset in PRESETS.items()},
}


def test_the_names_are_distinct_and_the_latency_table_has_exactly_them():
    assert len(set(OP_NAMES)) == len(OP_NAMES) == 13
    assert set(TP_SPLIT) == set(OP_NAMES)


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("past_tokens, new_tokens", [(0, 16), (64, 1)])
def test_every_op_layer_ops_produces_is_known_to_the_latency_model(name, past_tokens, new_tokens):
    shape = VARIANTS[name]
    ops = layer_ops(shape, batch=2, new_tokens=new_tokens, past_tokens=past_tokens)
    expected = BLOCK_OPS + tuple(n for n, present in zip(HEAD_OPS, (shape.final_norm, shape.lm_head)) if present)
    assert tuple(op.name for op in ops) == expected
    for op in ops:
        assert tp_split(op.name) == TP_SPLIT[op.name]
    for attn_impl in ("eager", "fused"):  # the fused inventory adds ATTENTION
        d = predict_forward(shape, hardware="h100", batch=1, seq_len=8, attn_impl=attn_impl).by_op
        fused_away = {ATTN_SCORES, ATTN_SOFTMAX, ATTN_VALUES} if attn_impl == "fused" else set()
        assert set(d) == set(expected) - fused_away | ({ATTENTION} if fused_away else set())


def test_split_rows_follow_megatron():
    assert tp_split(FINAL_NORM) == (False, False, False)  # replicated
    assert tp_split(LM_HEAD) == (True, False, True)  # column-parallel: whole input, sharded output
    assert tp_split(MLP_DOWN) == (True, True, False)  # row-parallel: sharded input, whole output


def test_an_unknown_op_raises():
    with pytest.raises(ValueError, match="unknown op 'mlp_gate'"):
        check_op_name("mlp_gate")
    with pytest.raises(ValueError, match="unknown op 'mlp_gate'"):
        Op(name="mlp_gate", kind="matmul", flops=1.0, weight_elems=1, read_elems=1, write_elems=1, repeat=1)
    with pytest.raises(ValueError, match="latency model does not know op 'mlp_gate'"):
        tp_split("mlp_gate")


def test_an_op_missing_from_the_latency_table_is_an_error_not_a_default(monkeypatch):
    monkeypatch.setattr(latency, "TP_SPLIT", {k: v for k, v in TP_SPLIT.items() if k != MLP_DOWN})
    with pytest.raises(ValueError, match="does not know op 'mlp_down'"):
        predict_decode(GPT2, hardware="h100", batch=1, context=16)
