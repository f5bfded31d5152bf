"""KV-cache decoding reproduces full recomputation: same greedy tokens, fp32 logits within 1e-5."""

from __future__ import annotations

import pytest
import torch

from depthwidth.model import Transformer
from depthwidth.model.cache import KVCache
from depthwidth.model.generate import generate, new_cache
from depthwidth.shapes.shape import Shape

BASE = dict(n_layers=2, d_model=32, n_heads=4, vocab_size=61, max_seq_len=40)
ATTN = {"mha": dict(n_kv_heads=4), "gqa": dict(n_kv_heads=2), "mqa": dict(n_kv_heads=1)}
POS = {
    "rope": dict(pos="rope", norm="rmsnorm", ffn="swiglu"),
    "learned": dict(pos="learned", bias="all"),
}


def _model(shape: Shape, attn_impl: str, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    # std 0.3 makes the logits spread out, so greedy choices are not near-ties
    return Transformer(shape, attn_impl=attn_impl, init_std=0.3).eval()


@pytest.mark.parametrize("attn_impl", ["sdpa", "eager"])
@pytest.mark.parametrize("pos", sorted(POS))
@pytest.mark.parametrize("attn", sorted(ATTN))
def test_cached_generation_equals_recomputation(attn: str, pos: str, attn_impl: str) -> None:
    shape = Shape(**BASE, **ATTN[attn], **POS[pos])
    model = _model(shape, attn_impl)
    prompt = torch.randint(0, shape.vocab_size, (3, 7), generator=torch.Generator().manual_seed(1))
    cached, cached_logits = generate(model, prompt, max_new_tokens=20, use_cache=True, return_logits=True)
    full, full_logits = generate(model, prompt, max_new_tokens=20, use_cache=False, return_logits=True)
    assert cached.shape == (3, 27)
    assert torch.equal(cached[:, :7], prompt)
    assert torch.equal(cached, full)
    assert cached_logits.shape == (3, 20, shape.vocab_size)
    torch.testing.assert_close(cached_logits, full_logits, rtol=1e-5, atol=1e-5)
    # the tokens are the argmax of the reported logits, and not all the same token
    assert torch.equal(cached[:, 7:], full_logits.argmax(dim=-1))
    assert cached[:, 7:].unique().numel() > 3


def test_cache_stores_only_kv_heads_and_fills_to_the_sequence() -> None:
    shape = Shape(**BASE, n_kv_heads=1, pos="rope")
    model = _model(shape, "sdpa")
    cache = new_cache(model, batch_size=2, max_len=12)
    assert cache.keys[0].shape == (2, 1, 12, 8)
    model(torch.zeros(2, 5, dtype=torch.long), cache=cache)
    model(torch.zeros(2, 1, dtype=torch.long), cache=cache)
    assert cache.length == 6
    # 2 (k and v) * L * B * n_kv_heads * head_dim * 4 bytes per cached token
    assert cache.used_bytes() == 2 * 2 * 2 * 1 * 8 * 4 * 6


def test_chunked_prefill_after_cached_tokens_matches_full_forward() -> None:
    """A multi-token chunk after cached tokens uses the bottom-right causal mask."""
    for impl in ("sdpa", "eager"):
        shape = Shape(**BASE, n_kv_heads=2, pos="rope")
        model = _model(shape, impl)
        seq = torch.randint(0, shape.vocab_size, (2, 11), generator=torch.Generator().manual_seed(3))
        full, _ = model(seq)
        cache = KVCache(shape, batch_size=2, max_len=11)
        first, _ = model(seq[:, :4], cache=cache)
        rest, _ = model(seq[:, 4:], cache=cache)
        torch.testing.assert_close(torch.cat([first, rest], dim=1), full, rtol=0, atol=1e-5)


def test_sampling_is_reproducible_with_a_generator() -> None:
    model = _model(Shape(**BASE), "sdpa")
    prompt = torch.zeros(1, 3, dtype=torch.long)
    a = generate(model, prompt, max_new_tokens=8, greedy=False, generator=torch.Generator().manual_seed(5))
    b = generate(model, prompt, max_new_tokens=8, greedy=False, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_bf16_cache_follows_the_model_dtype() -> None:
    model = _model(Shape(**BASE, n_kv_heads=2), "sdpa").to(torch.bfloat16)
    cache = new_cache(model, batch_size=1, max_len=4)
    assert cache.keys[0].dtype == torch.bfloat16
    out = generate(model, torch.zeros(1, 2, dtype=torch.long), max_new_tokens=2)
    assert out.shape == (1, 4)


def test_too_long_generation_names_the_limit() -> None:
    model = _model(Shape(**BASE), "sdpa")
    with pytest.raises(ValueError, match="max_seq_len=40"):
        generate(model, torch.zeros(1, 30, dtype=torch.long), max_new_tokens=11)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, torch.zeros(1, 3, dtype=torch.long), max_new_tokens=-1)


def test_zero_new_tokens_returns_the_prompt() -> None:
    model = _model(Shape(**BASE), "sdpa")
    prompt = torch.arange(6).view(2, 3)
    tokens, logits = generate(model, prompt, max_new_tokens=0, return_logits=True)
    assert torch.equal(tokens, prompt) and logits.shape == (2, 0, BASE["vocab_size"])
