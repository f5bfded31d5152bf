"""The model applies the parametrization's forward multipliers and init exactly as
`depthwidth.shapes.parametrization.multipliers` computes them, checked against explicit PyTorch math."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthwidth.model.transformer import Transformer
from depthwidth.shapes import Shape
from depthwidth.shapes.parametrization import multipliers


def scaled(shape: Shape, name: str, **base) -> Transformer:
    torch.manual_seed(0)
    m = multipliers(name, d_model=shape.d_model, n_layers=shape.n_layers, head_dim=shape.head_dim, **base)
    return Transformer(shape, scaling=m)


def reference_attention(attn, x: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(q k^T * scale) v with a causal mask, from the module's own weights (no RoPE, GQA repeated)."""
    s = attn.shape
    B, T, _ = x.shape
    q, k, v = F.linear(x, attn.qkv.weight, attn.qkv.bias).split([s.q_dim, s.kv_dim, s.kv_dim], dim=-1)
    q = q.view(B, T, s.n_heads, s.head_dim).transpose(1, 2)
    k = k.view(B, T, s.n_kv_heads, s.head_dim).transpose(1, 2).repeat_interleave(s.n_heads // s.n_kv_heads, 1)
    v = v.view(B, T, s.n_kv_heads, s.head_dim).transpose(1, 2).repeat_interleave(s.n_heads // s.n_kv_heads, 1)
    scores = (q @ k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, s.q_dim)
    return F.linear(y, attn.out.weight, attn.out.bias)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("name", ["mup", "completep", "depth-mup"])
def test_attention_logits_are_scaled_by_one_over_head_dim(impl, name):
    shape = Shape(n_layers=1, d_model=64, n_heads=4, n_kv_heads=2, vocab_size=32, max_seq_len=16, bias="all")
    model = scaled(shape, name, base_width=32)
    model.set_attn_impl(impl)
    attn = model.blocks[0].attn
    with torch.no_grad():  # weights large enough that 1/d and 1/sqrt(d) give visibly different softmaxes
        attn.qkv.weight.normal_(0, 0.5)
        attn.qkv.bias.normal_(0, 0.5)
    x = torch.randn(2, 12, 64)
    with torch.no_grad():
        got = attn(x, rope=None)
        right = reference_attention(attn, x, 1.0 / shape.head_dim)  # 1/16
        wrong = reference_attention(attn, x, 1.0 / math.sqrt(shape.head_dim))  # SP's 1/4
    torch.testing.assert_close(got, right, rtol=1e-5, atol=1e-5)
    assert (got - wrong).abs().max() > 1e-2


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_sp_attention_keeps_one_over_sqrt_head_dim(impl):
    shape = Shape(n_layers=1, d_model=32, n_heads=2, vocab_size=32, max_seq_len=16)
    model = Transformer(shape, attn_impl=impl)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.qkv.weight.normal_(0, 0.5)
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, rope=None), reference_attention(attn, x, 1 / math.sqrt(16)),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["sp", "mup", "completep", "depth-mup"])
def test_init_stds_are_the_functions(name):
    shape = Shape(n_layers=4, d_model=256, n_heads=8, vocab_size=512, max_seq_len=64, tie_embeddings=False)
    model = scaled(shape, name, base_width=64, base_depth=1)
    m = model.scaling
    b = model.blocks[0]
    for weight, std in ((b.attn.qkv.weight, m.hidden_init_std), (b.mlp.up.weight, m.hidden_init_std),
                        (b.attn.out.weight, m.residual_out_init_std), (b.mlp.down.weight, m.residual_out_init_std),
                        (model.embed.weight, 0.02), (model.pos_embed.weight, 0.02), (model.head.weight, 0.02)):
        assert weight.std().item() == pytest.approx(std, rel=0.03)
    expected_hidden = 0.02 if name == "sp" else 0.01  # 0.02 / sqrt(256 / 64)
    assert m.hidden_init_std == pytest.approx(expected_hidden)


def test_residual_branches_and_logits_carry_their_multipliers():
    shape = Shape(n_layers=8, d_model=64, n_heads=4, vocab_size=40, max_seq_len=16)
    model = scaled(shape, "completep", base_width=16, base_depth=2).eval()  # m_N = 4, m_L = 4
    assert model.scaling.residual_mult == 0.25 and model.scaling.logit_mult == 0.25
    idx = torch.randint(0, 40, (2, 10))
    with torch.no_grad():
        logits, _ = model(idx)
        x = model.embed(idx) + model.pos_embed(torch.arange(10))
        for block in model.blocks:  # x + m_L^-1 F(x), by hand
            x = x + 0.25 * block.attn(block.norm1(x), rope=None)
            x = x + 0.25 * block.mlp(block.norm2(x))
        by_hand = F.linear(model.final_norm(x) / 4, model.embed.weight)  # tied head, logits / m_N
    torch.testing.assert_close(logits, by_hand, rtol=1e-5, atol=1e-6)


def test_parallel_residual_scales_the_sum_of_both_branches():
    shape = Shape(n_layers=4, d_model=32, n_heads=2, vocab_size=40, max_seq_len=16, parallel_residual=True)
    model = scaled(shape, "depth-mup", base_depth=1).eval()  # m_L = 4: branches * 1/2
    block = model.blocks[0]
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        want = x + 0.5 * (block.attn(block.norm1(x), rope=None) + block.mlp(block.norm2(x)))
        torch.testing.assert_close(block(x, rope=None), want)
