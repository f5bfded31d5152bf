"""FLOPs: analytic counts against PyTorch's FlopCounterMode on the real module, and the published
formulas (PaLM/nanoGPT, Kaplan, Megatron-LM) as special cases."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from depthwidth.model import Transformer
from depthwidth.shapes import Shape, count_params
from depthwidth.shapes.flops import flops, keys_per_query, layer_ops

SHAPES = {
    "gpt2-like": Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=97, bias="all", max_seq_len=64),
    "gqa-swiglu-rope": Shape(n_layers=3, d_model=64, n_heads=8, n_kv_heads=2, ffn="swiglu", norm="rmsnorm",
                             pos="rope", vocab_size=50, tie_embeddings=False, max_seq_len=64),
    "mqa-relu-headdim": Shape(n_layers=1, d_model=48, n_heads=4, n_kv_heads=1, head_dim=16, ffn="relu",
                              vocab_size=33, max_seq_len=64),
    "qwen-bias-parallel": Shape(n_layers=2, d_model=32, n_heads=2, bias="qkv", parallel_residual=True,
                                vocab_size=40, d_ff=80, max_seq_len=64),
    "encoder-no-head": Shape(n_layers=2, d_model=32, n_heads=4, kind="encoder", norm_position="post",
                             final_norm=False, lm_head=False, pos="none", ffn="relu", bias="all",
                             vocab_size=30, max_seq_len=64),
}


def _counted(model, idx, *, backward: bool) -> int:
    with FlopCounterMode(display=False) as counter:
        out, loss = model(idx, idx if model.shape.lm_head else None)
        if backward:
            (loss if loss is not None else out.float().square().mean()).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("seq_len", [1, 7, 32])
def test_forward_flops_equal_flop_counter_on_eager_path(name, seq_len):
    shape = SHAPES[name]
    torch.manual_seed(0)
    model = Transformer(shape, attn_impl="eager")
    batch = 3
    idx = torch.randint(0, shape.vocab_size, (batch, seq_len))
    predicted = flops(shape, seq_len=seq_len, attention="full").forward_per_token * batch * seq_len
    assert _counted(model, idx, backward=False) == predicted


@pytest.mark.parametrize("name", ["gpt2-like", "gqa-swiglu-rope"])
def test_training_flops_are_three_forwards(name):
    shape = SHAPES[name]
    model = Transformer(shape, attn_impl="eager")
    idx = torch.randint(0, shape.vocab_size, (2, 16))
    predicted = flops(shape, seq_len=16, attention="full").train_per_token * 2 * 16
    assert _counted(model, idx, backward=True) == predicted


def _matmul_weights(shape: Shape) -> int:
    """Parameters of the weight matrices a token is multiplied by (head included, biases/norms not)."""
    p = count_params(shape)
    d = shape.d_model
    per_layer = d * (shape.q_dim + 2 * shape.kv_dim) + shape.q_dim * d + (3 if shape.ffn == "swiglu" else 2) * d * shape.d_ff
    assert per_layer <= p.per_layer
    return shape.n_layers * per_layer + shape.vocab_size * d


def test_palm_nanogpt_formula_is_the_full_attention_case():
    # PaLM appendix B / nanoGPT estimate_mfu: 6N + 12*L*H*Q*T per token.
    shape = Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50304, max_seq_len=1024)
    T = 1024
    n = _matmul_weights(shape)
    palm = 6 * n + 12 * shape.n_layers * shape.n_heads * shape.head_dim * T
    assert flops(shape, seq_len=T, attention="full").train_per_token == palm


def test_kaplan_forward_is_the_causal_case_without_head():
    # Kaplan et al. 2020: C_forward = 2N + 2 L n_ctx d_attn, N = 12 L d^2 non-embedding (d_ff = 4d).
    shape = Shape(n_layers=24, d_model=1024, n_heads=16, vocab_size=50257, max_seq_len=2048)
    T = 2048
    n_kaplan = 12 * shape.n_layers * shape.d_model**2
    f = flops(shape, seq_len=T, attention="causal")
    assert f.forward_per_token - f.lm_head == 2 * n_kaplan + 2 * shape.n_layers * T * shape.d_model


def test_megatron_causal_formula_with_gqa_and_swiglu():
    # Megatron-LM: 6 B s [L (h(q+2k) + q h + m h f) + h V] + 6 B s^2 L q, m = 3 for SwiGLU.
    shape = Shape(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_ff=14336, ffn="swiglu",
                  norm="rmsnorm", pos="rope", vocab_size=128256, tie_embeddings=False, max_seq_len=8192)
    B, s = 4, 8192
    h, q, k, f, V, L = shape.d_model, shape.q_dim, shape.kv_dim, shape.d_ff, shape.vocab_size, shape.n_layers
    megatron = 6 * B * s * (L * (h * (q + 2 * k) + q * h + 3 * h * f) + h * V) + 6 * B * s**2 * L * q
    assert flops(shape, seq_len=s, attention="causal").train_per_token * B * s == megatron


def test_recompute_adds_hardware_flops_only():
    shape = SHAPES["gpt2-like"]
    none = flops(shape, seq_len=32)
    sel = flops(shape, seq_len=32, recompute="selective")
    full = flops(shape, seq_len=32, recompute="full")
    assert none.train_per_token == sel.train_per_token == full.train_per_token
    assert none.hardware_train_per_token == none.train_per_token
    assert sel.hardware_train_per_token - none.train_per_token == none.attention_scores + none.attention_values
    assert full.hardware_train_per_token == 3 * none.forward_per_token + none.blocks_forward_per_token


def test_causal_attention_term_is_half_of_full():
    shape = SHAPES["gpt2-like"]
    full, causal = flops(shape, seq_len=64, attention="full"), flops(shape, seq_len=64)
    assert causal.attention_scores * 2 == full.attention_scores
    assert causal.qkv == full.qkv and causal.mlp == full.mlp


def test_decode_op_reads_the_whole_kv_cache():
    shape = SHAPES["gqa-swiglu-rope"]
    ops = {op.name: op for op in layer_ops(shape, batch=2, new_tokens=1, past_tokens=99, attention="full")}
    assert keys_per_query(new_tokens=1, past_tokens=99, attention="full") == 100
    assert ops["attn_scores"].flops == 2 * 2 * 100 * shape.q_dim
    assert ops["attn_scores"].read_elems == 2 * shape.q_dim + 2 * 100 * shape.kv_dim
    assert ops["qkv"].weight_elems == shape.d_model * (shape.q_dim + 2 * shape.kv_dim)


@pytest.mark.parametrize(
    "kwargs, field",
    [({"seq_len": 0}, "seq_len"), ({"seq_len": 8, "attention": "sparse"}, "attention"),
     ({"seq_len": 8, "recompute": "some"}, "recompute")],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        flops(SHAPES["gpt2-like"], **kwargs)
