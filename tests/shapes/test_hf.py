"""Hugging Face configs -> Shape -> exact published parameter totals; bad configs name file and field."""

import json

import pytest

from depthwidth.hfconfig import from_hf_config, read_hf_config
from depthwidth.shapes.hf import SUPPORTED_MODEL_TYPES, shape_from_hf_config
from depthwidth.shapes.params import count_params
from depthwidth.shapes.presets import PRESETS

# Field values as in the public config.json of each model on the Hugging Face Hub.
GPT2 = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
    "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
    "summary_use_proj": True, "vocab_size": 50257,
}
GPT2_XL = {**GPT2, "n_embd": 1600, "n_head": 25, "n_layer": 48, "n_ctx": 1024}
LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000,
}
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0", "use_cache": True, "vocab_size": 128256,
}
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
}
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": True, "use_mrope": False, "use_sliding_window": False,
    "vocab_size": 151936,
}
PYTHIA_160M = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False, "torch_dtype": "float16",
    "transformers_version": "4.24.0", "use_cache": True, "use_parallel_residual": True, "vocab_size": 50304,
}


@pytest.mark.parametrize(
    "config, total, preset",
    [
        (GPT2, 124_439_808, "gpt2-small"),
        (GPT2_XL, 1_557_611_200, "gpt2-xl"),
        (LLAMA2_7B, 6_738_415_616, "llama-2-7b"),
        (LLAMA3_8B, 8_030_261_248, "llama-3-8b"),
        (MISTRAL_7B, 7_241_732_096, "mistral-7b"),
        (QWEN25_05B, 494_032_768, "qwen2.5-0.5b"),
        (PYTHIA_160M, 162_322_944, "pythia-160m"),
    ],
)
def test_hf_configs_give_published_totals_and_equal_presets(config, total, preset):
    shape = shape_from_hf_config(config, source="config.json")
    assert count_params(shape).total == total
    assert shape == PRESETS[preset].shape


def test_fields_are_mapped():
    shape = shape_from_hf_config(QWEN25_05B)
    assert (shape.n_kv_heads, shape.bias, shape.tie_embeddings, shape.rope_theta) == (2, "qkv", True, 1e6)
    neox = shape_from_hf_config({**PYTHIA_160M, "use_parallel_residual": False})
    assert neox.parallel_residual is False and neox.norm_bias
    # head_dim given explicitly (Mistral-Nemo style: 32 heads of 128 on a 5120 width)
    nemo = shape_from_hf_config({**MISTRAL_7B, "hidden_size": 5120, "head_dim": 128, "vocab_size": 131072})
    assert nemo.q_dim == 4096 and nemo.d_model == 5120
    # newer transformers nest rope_theta in rope_parameters
    nested = {k: v for k, v in LLAMA3_8B.items() if k != "rope_theta"}
    nested["rope_parameters"] = {"rope_theta": 500000.0, "rope_type": "default"}
    assert shape_from_hf_config(nested).rope_theta == 500000.0
    # biases on every llama Linear
    assert shape_from_hf_config({**LLAMA2_7B, "attention_bias": True, "mlp_bias": True}).bias == "all"


@pytest.mark.parametrize(
    "config, words",
    [
        ({**LLAMA2_7B, "model_type": "bert"}, ["my.json", "'bert'", "not supported", *SUPPORTED_MODEL_TYPES]),
        ({k: v for k, v in LLAMA2_7B.items() if k != "model_type"}, ["my.json", "model_type", "gpt_neox"]),
        ({k: v for k, v in LLAMA2_7B.items() if k != "hidden_size"}, ["my.json", "'hidden_size'", "llama"]),
        ({k: v for k, v in GPT2.items() if k not in ("n_positions", "n_ctx")}, ["my.json", "'n_positions'"]),
        ({**LLAMA2_7B, "num_hidden_layers": "32"}, ["my.json", "'num_hidden_layers'", "positive integer"]),
        ({**LLAMA2_7B, "num_hidden_layers": 0}, ["my.json", "'num_hidden_layers'", "positive integer"]),
        ({**LLAMA2_7B, "hidden_act": "gelu"}, ["my.json", "'hidden_act'", "silu"]),
        ({**LLAMA2_7B, "tie_word_embeddings": "no"}, ["my.json", "'tie_word_embeddings'", "true or false"]),
        ({**LLAMA2_7B, "attention_bias": True}, ["my.json", "attention_bias=true", "mlp_bias=false"]),
        ({**GPT2, "activation_function": "swish"}, ["my.json", "'activation_function'", "'swish'"]),
        ({**LLAMA2_7B, "num_key_value_heads": 5}, ["my.json", "n_kv_heads=5", "n_heads=32"]),
        ({**PYTHIA_160M, "attention_bias": False}, ["my.json", "attention_bias=false", "gpt_neox"]),
        ([1, 2], ["my.json", "JSON object"]),
    ],
)
def test_bad_configs_name_file_and_field(config, words):
    with pytest.raises(ValueError) as info:
        shape_from_hf_config(config, source="my.json")
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert "\n" not in message


def test_from_hf_config_reads_files_and_folders(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    assert count_params(from_hf_config(tmp_path)).total == 8_030_261_248
    assert count_params(from_hf_config(tmp_path / "config.json")).total == 8_030_261_248
    assert count_params(from_hf_config(LLAMA3_8B)).total == 8_030_261_248


def test_file_errors_name_file_line_and_column(tmp_path):
    text = json.dumps(MISTRAL_7B, indent=2)
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"truncated\.json: invalid JSON at line \d+, column \d+"):
        read_hf_config(truncated)
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096,,\n}')
    with pytest.raises(ValueError, match=r"malformed\.json: invalid JSON at line 3, column 23"):
        read_hf_config(malformed)
    unsupported = tmp_path / "bert.json"
    unsupported.write_text(json.dumps({"model_type": "bert", "hidden_size": 768}))
    with pytest.raises(ValueError, match=r"bert\.json: model_type 'bert' is not supported"):
        from_hf_config(unsupported)
    missing_field = tmp_path / "nolayers.json"
    missing_field.write_text(json.dumps({k: v for k, v in QWEN25_05B.items() if k != "num_hidden_layers"}))
    with pytest.raises(ValueError, match=r"nolayers\.json: missing field 'num_hidden_layers'"):
        from_hf_config(missing_field)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match=r"binary\.json: not UTF-8"):
        read_hf_config(binary)
    with pytest.raises(FileNotFoundError, match="absent.json"):
        read_hf_config(tmp_path / "absent.json")
