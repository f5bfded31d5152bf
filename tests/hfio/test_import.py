"""Hugging Face models come in: tiny models of every supported class, made and saved by `transformers`
itself (random weights, every tensor perturbed), read into our model give the same logits within 1e-5;
a sharded checkpoint reads the same; what our model cannot compute exactly, a pickle checkpoint, a folder
without config.json, and weights that do not fit their config are refused with one line."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth.errors import UserError
from depthwidth.hfio.load import load_hf_model, read_hf_checkpoint

transformers = pytest.importorskip("transformers")

SIZES = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=48)
CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=48),
    "llama": lambda: transformers.LlamaConfig(**SIZES, num_key_value_heads=2, rope_theta=1000.0),
    "mistral": lambda: transformers.MistralConfig(**SIZES, num_key_value_heads=1, sliding_window=None),
    "qwen2": lambda: transformers.Qwen2Config(**SIZES, num_key_value_heads=2, tie_word_embeddings=True),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(**SIZES, rotary_pct=1.0, hidden_act="gelu_new",
                                                   use_parallel_residual=True),
}


def _save(config, folder, **save) -> torch.nn.Module:
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)  # biases and norms away from their zero/one init
    model.save_pretrained(folder, **save)
    return model


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
@torch.no_grad()
def test_a_transformers_model_reads_into_ours_with_the_same_logits(model_type, tmp_path):
    theirs = _save(CONFIGS[model_type](), tmp_path)
    ours, info = load_hf_model(tmp_path)
    assert info.model_type == model_type and info.mismatches == ()
    tokens = torch.randint(0, 96, (2, 40), generator=torch.Generator().manual_seed(1))
    diff = (ours(tokens)[0] - theirs(tokens).logits).abs().max().item()
    print(f"{model_type}: max |logit diff| {diff:.2e}")  # shown with pytest -s
    assert diff <= 1e-5, f"{model_type}: max |logit diff| {diff:.2e}"


@torch.no_grad()
def test_a_sharded_checkpoint_reads_the_same(tmp_path):
    config = CONFIGS["llama"]()
    _save(config, tmp_path / "one")
    _save(config, tmp_path / "many", max_shard_size="40KB")
    assert (tmp_path / "many" / "model.safetensors.index.json").is_file()
    one, many = read_hf_checkpoint(tmp_path / "one"), read_hf_checkpoint(tmp_path / "many")
    assert all(torch.equal(one.state[k], many.state[k]) for k in one.state) and one.shape == many.shape


def test_what_our_model_computes_differently_is_refused_for_training_named_for_timing(tmp_path):
    _save(transformers.GPTNeoXConfig(**SIZES), tmp_path)  # transformers' defaults: erf GELU, rotary_pct 0.25
    with pytest.raises(UserError) as info:
        read_hf_checkpoint(tmp_path)
    assert str(info.value) == (f"{tmp_path}/config.json: hidden_act='gelu' (our GELU is the tanh approximation; "
                               "that one is not); our model would not compute this checkpoint exactly, so it is not "
                               "trained from")
    timed = read_hf_checkpoint(tmp_path, exact=False)
    assert [m.split(" (")[0] for m in timed.mismatches] == ["hidden_act='gelu'", "partial rotary 0.25"]


def test_a_pickle_checkpoint_is_never_loaded(tmp_path):
    theirs = _save(CONFIGS["gpt2"](), tmp_path)
    (tmp_path / "model.safetensors").unlink()
    torch.save(theirs.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(UserError, match=r"pytorch_model.bin is a pickle checkpoint, which is never loaded \(unpickling "
                                        r"can run code\); convert it to model.safetensors"):
        read_hf_checkpoint(tmp_path)


def test_folders_and_weights_that_do_not_fit_are_one_line(tmp_path):
    with pytest.raises(UserError, match="no such Hugging Face model folder"):
        read_hf_checkpoint(tmp_path / "absent")
    with pytest.raises(UserError, match="has no config.json; a Hugging Face model folder holds config.json"):
        read_hf_checkpoint(tmp_path)
    _save(CONFIGS["gpt2"](), tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "n_embd": 64}))
    with pytest.raises(UserError, match=r"tensor 'transformer.wte.weight' has size \(96, 32\), which does not fit the config's "
                                        r"shape L2-H64-A4 \(expected \(96, 64\), our embed.weight\)$"):
        read_hf_checkpoint(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "n_layer": 1}))
    with pytest.raises(UserError, match=r"tensor\(s\) this config's class does not have, e.g. 'transformer.h.1."):
        read_hf_checkpoint(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    with pytest.raises(UserError, match=r"the weights lack tensor 'transformer.h.2.ln_1.weight'"):
        read_hf_checkpoint(tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(UserError, match="model.safetensors is not a readable safetensors file"):
        read_hf_checkpoint(tmp_path / "m")
