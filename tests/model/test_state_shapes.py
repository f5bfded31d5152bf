"""`state_shapes` and `model_bytes` - what a checkpoint's weights are checked against before a model is
built - equal the real module's state dict and allocation, for every preset and every convention."""

from __future__ import annotations

import pytest
import torch

from depthwidth.model.transformer import Transformer, model_bytes, state_shapes
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape

SMALL = Shape(n_layers=3, d_model=32, n_heads=4, vocab_size=50, max_seq_len=24)
VARIANTS = [
    {}, {"bias": "all"}, {"bias": "qkv"}, {"pos": "rope"}, {"pos": "none"}, {"tie_embeddings": False},
    {"ffn": "swiglu", "norm": "rmsnorm"}, {"norm_position": "post"}, {"final_norm": False},
    {"lm_head": False, "kind": "encoder"}, {"n_kv_heads": 2, "head_dim": 16}, {"parallel_residual": True},
]


def real(shape: Shape, *, device: str) -> dict[str, tuple[int, ...]]:
    with torch.device(device):
        return {name: tuple(t.shape) for name, t in Transformer(shape).state_dict().items()}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset(name):
    shape = PRESETS[name].shape
    assert list(state_shapes(shape).items()) == list(real(shape, device="meta").items())


@pytest.mark.parametrize("change", VARIANTS, ids=str)
def test_every_convention_and_the_bytes_built(change):
    shape = SMALL.with_(**change)
    assert list(state_shapes(shape).items()) == list(real(shape, device="cpu").items())
    model = Transformer(shape)
    built = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    assert model_bytes(shape) == 4 * built
