"""Which Hugging Face class holds a shape (pure: no torch model, no transformers): every supported
family, its config read back by the HF config import as the shape the class holds, and a one-line
refusal naming the option for every shape no class holds exactly."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.hfio.arch import choose_arch, hf_config, import_mismatches
from depthwidth.shapes.hf import shape_from_hf_config
from depthwidth.shapes.shape import Shape

BASE = dict(n_layers=2, d_model=32, n_heads=4, vocab_size=256, max_seq_len=64)
LLAMA = dict(ffn="swiglu", norm="rmsnorm", pos="rope")

SUPPORTED = [
    (dict(bias="all"), "gpt2", "GPT2LMHeadModel"),
    (dict(), "gpt2", "GPT2LMHeadModel"),  # bias-free: GPT-2 with zero biases
    (dict(ffn="relu", bias="qkv", tie_embeddings=False, norm_eps=1e-6), "gpt2", "GPT2LMHeadModel"),
    (dict(**LLAMA, n_kv_heads=2, rope_theta=500.0), "llama", "LlamaForCausalLM"),
    (dict(**LLAMA, bias="all", head_dim=16, tie_embeddings=False), "llama", "LlamaForCausalLM"),
    (dict(**LLAMA, bias="qkv", n_kv_heads=1), "qwen2", "Qwen2ForCausalLM"),
    (dict(pos="rope", parallel_residual=True, bias="all"), "gpt_neox", "GPTNeoXForCausalLM"),
    (dict(pos="rope", ffn="relu"), "gpt_neox", "GPTNeoXForCausalLM"),
]


@pytest.mark.parametrize(("changes", "model_type", "cls"), SUPPORTED)
def test_each_family_gets_its_class_and_the_config_reads_back(changes, model_type, cls):
    shape = Shape(**BASE, **changes)
    arch = choose_arch(shape)
    assert (arch.model_type, arch.class_name) == (model_type, cls)
    config = hf_config(shape)
    assert config["architectures"] == [cls] and config["model_type"] == model_type
    assert shape_from_hf_config(config) == arch.hf_shape  # what the class holds, read by the import
    assert arch.hf_shape.with_(bias=shape.bias) == shape  # only biases the class always has are added
    assert Shape.from_dict(config["depthwidth"]["shape"]) == shape
    assert import_mismatches(config) == []  # our model computes exactly what the class computes


REFUSED = [
    (dict(kind="encoder", lm_head=False), "kind='encoder'"),
    (dict(lm_head=False), "lm_head=False"),
    (dict(norm_position="post"), "norm_position='post'"),
    (dict(final_norm=False), "final_norm=False"),
    (dict(pos="none"), "pos='none'"),
    (dict(norm="rmsnorm"), "norm='rmsnorm'; GPT2LMHeadModel (chosen for pos='learned') needs norm='layernorm'"),
    (dict(pos="rope", norm="rmsnorm"), "norm='rmsnorm'; GPTNeoXForCausalLM"),
    (dict(ffn="swiglu"), "norm='layernorm'; LlamaForCausalLM (chosen for ffn='swiglu') needs norm='rmsnorm'"),
    (dict(ffn="swiglu", norm="rmsnorm"), "pos='learned'; LlamaForCausalLM (chosen for ffn='swiglu') needs pos='rope'"),
    (dict(**LLAMA, parallel_residual=True), "parallel_residual=True; LlamaForCausalLM"),
    (dict(parallel_residual=True), "parallel_residual=True; GPT2LMHeadModel"),
    (dict(n_kv_heads=2), "n_kv_heads=2; GPT2LMHeadModel"),
    (dict(pos="rope", n_kv_heads=1), "n_kv_heads=1; GPTNeoXForCausalLM"),
    (dict(head_dim=16), "head_dim=16; GPT2LMHeadModel (chosen for pos='learned') needs head_dim = d_model / n_heads = 8"),
]


@pytest.mark.parametrize(("changes", "named"), REFUSED)
def test_a_shape_no_class_holds_is_refused_naming_the_option(changes, named):
    shape = Shape(**BASE, **changes)
    with pytest.raises(UserError) as info:
        choose_arch(shape)
    message = str(info.value)
    assert named in message and "\n" not in message
    assert message.startswith(f"cannot export {shape.label()}: ")
    assert message.endswith("no Hugging Face class holds this shape exactly")


def test_import_mismatches_name_what_our_model_would_compute_differently():
    neox = {"model_type": "gpt_neox", "hidden_act": "gelu"}  # transformers' defaults: rotary_pct 0.25
    assert import_mismatches(neox) == [
        "hidden_act='gelu' (our GELU is the tanh approximation; that one is not)",
        "partial rotary 0.25 (our RoPE rotates the whole head)",
    ]
    assert import_mismatches({"model_type": "gpt_neox", "hidden_act": "gelu_new", "rotary_pct": 1.0}) == []
    assert import_mismatches({"model_type": "gpt2"}) == []  # gelu_new is the tanh formula
    llama = {"model_type": "llama", "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert import_mismatches(llama) == ["rope_type='linear' (our RoPE is unscaled)"]
    mistral = {"model_type": "mistral", "sliding_window": 16, "max_position_embeddings": 64}
    assert import_mismatches(mistral) == ["sliding_window=16 (our attention sees the whole context)"]
    assert import_mismatches({**mistral, "sliding_window": 64}) == []  # a window as long as the context
    gpt2 = {"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": True}
    assert import_mismatches(gpt2) == ["scale_attn_by_inverse_layer_idx=true (our attention does not)"]
