"""`summarize` gathers params, FLOPs and memory under one set of settings, with stable JSON keys."""

import json

import pytest

from depthwidth.shapes.flops import flops
from depthwidth.shapes.memory import memory
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape
from depthwidth.shapes.summary import SummarySettings, summarize


def test_keys_round_trip_and_consistency():
    shape = PRESETS["llama-3-8b"].shape
    out = summarize(shape, seq_len=4096, micro_batch=2).to_dict()
    json.dumps(out)  # plain JSON
    assert Shape.from_dict(out["shape"]) == shape
    assert out["params"]["total"] == 8_030_261_248
    assert out["flops"]["forward_per_token"] == flops(shape, seq_len=4096).forward_per_token
    mem = memory(shape, seq_len=4096, micro_batch=2, train_precision="bf16-mixed", attn_impl="fused",
                 kv_batch=2, kv_context=4096)
    assert out["memory"]["total_training_bytes"] == mem.total_training_bytes
    assert out["memory"]["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 2 * 4096
    assert out["settings"]["seq_len"] == 4096 and out["derived"]["label"] == "L32-H4096-A32-KV8-F14336"


def test_defaults_follow_the_shape():
    enc = summarize(PRESETS["torch-encoder-6x512"].shape)
    assert enc.settings.seq_len == 512 and enc.settings.attention == "full"
    dec = summarize(PRESETS["nanogpt-baby"].shape)
    assert dec.settings.seq_len == 64 and dec.settings.attention == "causal"


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"seq_len": 0}, "seq_len=0"),
        ({"seq_len": 8, "micro_batch": -1}, "micro_batch=-1"),
        ({"seq_len": 8, "zero_stage": 4}, "zero_stage=4"),
        ({"seq_len": 8, "optimizer": "lion"}, "optimizer='lion'"),
        ({"seq_len": 8, "attention": "sparse"}, "attention='sparse'"),
        ({"seq_len": 8, "sp": "yes"}, "sp='yes'"),
    ],
)
def test_settings_validation(options, fragment):
    with pytest.raises(ValueError, match=fragment):
        SummarySettings(**options)


def test_seq_len_beyond_context_is_refused():
    with pytest.raises(ValueError, match="seq_len=2048 exceeds max_seq_len=1024"):
        summarize(PRESETS["gpt2-small"].shape, seq_len=2048)
