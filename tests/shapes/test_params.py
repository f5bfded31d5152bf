"""Analytic parameter counts equal the real modules: every preset, published totals, PyTorch's own
nn.TransformerEncoder, and a few hundred random shapes (all built on the meta device)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from depthwidth.model.transformer import Transformer
from depthwidth.shapes.params import count_params
from depthwidth.shapes.presets import PRESETS, get_preset
from depthwidth.shapes.shape import BIAS_KINDS, FFN_KINDS, NORM_KINDS, POS_KINDS, Shape


def module_params(shape: Shape) -> int:
    with torch.device("meta"):
        model = Transformer(shape)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_matches_its_module(name):
    shape = PRESETS[name].shape
    assert count_params(shape).total == module_params(shape)


# Published totals (HF model parameter counts; Pythia README "Models" table; nanoGPT bias=False).
PUBLISHED = {
    "gpt2-small": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "gpt2-small-nobias": 124_337_664,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-0.5b": 494_032_768,
    "pythia-14m": 14_067_712,
    "pythia-70m": 70_426_624,
    "pythia-160m": 162_322_944,
    "pythia-410m": 405_334_016,
    "pythia-1b": 1_011_781_632,
    "pythia-6.9b": 6_857_302_016,
    "pythia-12b": 11_846_072_320,
}


@pytest.mark.parametrize("name, total", sorted(PUBLISHED.items()))
def test_published_totals(name, total):
    assert count_params(PRESETS[name].shape).total == total


def test_published_params_field_agrees_with_count():
    for preset in PRESETS.values():
        if preset.published_params is not None:
            assert count_params(preset.shape).total == preset.published_params, preset.name


def test_pythia_non_embedding_matches_readme():
    # Pythia README: non-embedding parameters of pythia-160m and pythia-1b.
    assert count_params(PRESETS["pythia-160m"].shape).non_embedding == 85_056_000
    assert count_params(PRESETS["pythia-1b"].shape).non_embedding == 805_736_448


def test_mobilellm_rounds_to_the_model_card():
    # Model card: 124.6M and 345.3M (truncated to one decimal).
    assert count_params(PRESETS["mobilellm-125m"].shape).total // 100_000 == 1246
    assert count_params(PRESETS["mobilellm-350m"].shape).total // 100_000 == 3453


@pytest.mark.parametrize(
    "name, nominal",
    [("gpt3-125m", 125e6), ("gpt3-350m", 350e6), ("gpt3-760m", 760e6), ("gpt3-2.7b", 2.7e9),
     ("gpt3-6.7b", 6.7e9), ("gpt3-13b", 13e9), ("gpt3-175b", 175e9)],
)
def test_gpt3_table_sizes_are_near_their_names(name, nominal):
    assert count_params(PRESETS[name].shape).total == pytest.approx(nominal, rel=0.02)


def test_gpt3_xl_literal_table_and_the_nominal_size():
    # Table 2.1 literally (24 heads of 128 on d_model 2048) counts 1.52B; width-2048 attention gives 1.3B.
    literal = PRESETS["gpt3-1.3b"].shape
    assert count_params(literal).total == pytest.approx(1.517e9, rel=1e-3)
    assert count_params(literal.with_(n_heads=16)).total == pytest.approx(1.3e9, rel=0.02)


def test_torch_encoder_preset_matches_pytorch_modules():
    with torch.device("meta"):
        embed = nn.Embedding(30000, 512)
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048), num_layers=6)
    reference = sum(p.numel() for m in (embed, encoder) for p in m.parameters())
    breakdown = count_params(PRESETS["torch-encoder-6x512"].shape)
    assert breakdown.total == reference == 34_274_304
    layer = sum(p.numel() for p in encoder.layers[0].parameters())
    assert breakdown.per_layer == layer


def test_get_preset_normalises_and_suggests():
    assert get_preset("GPT2_Small") is PRESETS["gpt2-small"]
    with pytest.raises(ValueError, match="did you mean.*gpt2-small"):
        get_preset("gpt2-smal")
    with pytest.raises(ValueError, match="known presets: .*llama-2-7b"):
        get_preset("no-such-model")


def test_presets_are_kebab_case_and_cited():
    for name, preset in PRESETS.items():
        assert name == preset.name and name == name.lower() and "_" not in name
        assert len(preset.source) > 10


# ---- per-layer constant c in per_layer = c * d^2 -------------------------------------------
def test_per_layer_constant_gelu_is_twelve_plus_order_one_over_d():
    for d in (256, 768, 4096):
        with_bias = Shape(n_layers=2, d_model=d, n_heads=d // 64, vocab_size=10, bias="all")
        no_bias = with_bias.with_(bias="none")
        # 12 d^2 plus biases (4d attention + 5d MLP) and two LayerNorms (4d with bias, 2d without).
        assert count_params(with_bias).per_layer_constant == pytest.approx(12 + 13 / d, rel=1e-12)
        assert count_params(no_bias).per_layer_constant == pytest.approx(12 + 2 / d, rel=1e-12)


def test_per_layer_constant_swiglu_and_gqa():
    # SwiGLU with d_ff = 8d/3 keeps the MLP at 8 d^2: c = 12 + 2/d (two RMSNorms).
    d = 768
    swiglu = Shape(n_layers=2, d_model=d, n_heads=12, vocab_size=10, ffn="swiglu", norm="rmsnorm", d_ff=8 * d // 3)
    assert count_params(swiglu).per_layer_constant == pytest.approx(12 + 2 / d, rel=1e-12)
    # GQA with 8 of 32 kv heads: attention 2 + 2 * 8/32 = 2.5 d^2; MLP 3 * 3.5 = 10.5 d^2 -> 13.
    llama3 = PRESETS["llama-3-8b"].shape
    assert count_params(llama3).per_layer_constant == pytest.approx(13 + 2 / 4096, rel=1e-12)
    # MQA removes almost all k/v weights: 2 + 2/32.
    mqa = llama3.with_(n_kv_heads=1)
    assert count_params(mqa).per_layer_constant == pytest.approx(2 + 2 / 32 + 10.5 + 2 / 4096, rel=1e-12)


# ---- random shapes ------------------------------------------------------------------------
@st.composite
def shapes(draw):
    n_heads = draw(st.integers(1, 6))
    n_kv_heads = draw(st.sampled_from([k for k in range(1, n_heads + 1) if n_heads % k == 0]))
    head_dim = draw(st.sampled_from([2, 4, 6, 8]))
    override = draw(st.booleans())
    d_model = draw(st.integers(1, 24)) if override else n_heads * head_dim
    norm_position = draw(st.sampled_from(["pre", "post"]))
    return Shape(
        n_layers=draw(st.integers(1, 3)),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim if override else None,
        d_ff=draw(st.one_of(st.none(), st.integers(1, 40))),
        vocab_size=draw(st.integers(1, 50)),
        ffn=draw(st.sampled_from(FFN_KINDS)),
        norm=draw(st.sampled_from(NORM_KINDS)),
        bias=draw(st.sampled_from(BIAS_KINDS)),
        pos=draw(st.sampled_from(POS_KINDS)),
        max_seq_len=draw(st.integers(1, 16)),
        parallel_residual=draw(st.booleans()) if norm_position == "pre" else False,
        norm_position=norm_position,
        final_norm=draw(st.booleans()),
        tie_embeddings=draw(st.booleans()),
        lm_head=draw(st.booleans()),
        kind=draw(st.sampled_from(["decoder", "encoder"])),
    )


@settings(max_examples=300, deadline=None)
@given(shape=shapes())
def test_random_shapes_match_module(shape):
    with torch.device("meta"):
        model = Transformer(shape)
    counts = count_params(shape)
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert counts.per_layer == sum(p.numel() for p in model.blocks[0].parameters())
    assert counts.embedding == model.embed.weight.numel()
