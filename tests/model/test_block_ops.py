"""A block of our model costs what the same block written out by hand costs: the same aten ops, forward and
backward, with bit-identical results; no-op dropout calls are not made."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from depthwidth.model.transformer import Transformer
from depthwidth.shapes import Shape


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


def by_hand(block, x: torch.Tensor) -> torch.Tensor:
    """A GPT-2 pre-norm block from the module's own weights, as one writes it (nanoGPT's Block)."""
    a, m = block.attn, block.mlp
    B, T, D = x.shape
    H = a.shape.n_heads
    h = F.layer_norm(x, (D,), block.norm1.weight, block.norm1.bias, block.norm1.eps)
    q, k, v = F.linear(h, a.qkv.weight, a.qkv.bias).split([D, D, D], dim=-1)
    q, k, v = (t.view(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
    x = x + F.linear(y, a.out.weight, a.out.bias)
    h = F.layer_norm(x, (D,), block.norm2.weight, block.norm2.bias, block.norm2.eps)
    return x + F.linear(F.gelu(F.linear(h, m.up.weight, m.up.bias), approximate="tanh"), m.down.weight, m.down.bias)


def counted(fn, x: torch.Tensor, params) -> tuple[collections.Counter, collections.Counter, torch.Tensor, list]:
    forward, backward = OpCounter(), OpCounter()
    with forward:
        y = fn(x)
    with backward:
        y.square().sum().backward()
    grads = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    return forward.counts, backward.counts, y.detach(), grads


@pytest.mark.parametrize("d_model,n_heads", [(32, 1), (64, 4)])
def test_block_dispatches_the_ops_of_the_hand_written_block(d_model, n_heads):
    shape = Shape(n_layers=1, d_model=d_model, n_heads=n_heads, vocab_size=64, max_seq_len=16, bias="all")
    torch.manual_seed(0)
    block = Transformer(shape).train().blocks[0]
    params = list(block.parameters())
    x = torch.randn(3, 16, d_model)
    ours = counted(lambda t: block(t, rope=None), x, params)
    hand = counted(lambda t: by_hand(block, t), x, params)
    assert ours[0] == hand[0]  # forward ops, by name and count
    assert ours[1] == hand[1]  # backward ops
    assert torch.equal(ours[2], hand[2])
    assert all(torch.equal(a, b) for a, b in zip(ours[3], hand[3]))


def test_no_dropout_call_at_zero_and_dropout_applied_above(monkeypatch):
    shape = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=64, max_seq_len=16, bias="all")
    idx = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    calls = []
    real = F.dropout
    monkeypatch.setattr(F, "dropout", lambda *a, **k: calls.append(k.get("p", a[1] if len(a) > 1 else None))
                        or real(*a, **k))
    torch.manual_seed(0)
    plain = Transformer(shape).train()
    _, loss = plain(idx, idx)
    assert calls == []
    assert loss == plain.eval()(idx, idx)[1]  # p = 0: training and evaluation compute the same
    torch.manual_seed(0)
    dropped = Transformer(shape, dropout=0.25).train()
    torch.manual_seed(3)
    _, loss_dropped = dropped(idx, idx)
    assert calls == [0.25] * (1 + 2 * shape.n_layers)  # embeddings, then each block's two branches
    torch.manual_seed(3)
    assert dropped(idx, idx)[1] == loss_dropped  # the same RNG draws, the same loss
    assert loss_dropped != loss
    assert dropped.eval()(idx, idx)[1] == loss  # evaluation calls no dropout either
    assert len(calls) == 2 * (1 + 2 * shape.n_layers)
