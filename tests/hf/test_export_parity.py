"""A trained tiny run of every supported architecture, exported and loaded by `transformers` itself
(`AutoModelForCausalLM.from_pretrained`, local files only): the same logits within 1e-5 in fp32 on the
run's validation tokens, the same 20 greedy tokens, no missing or unexpected weights, and the export
read back by our importer bit for bit."""

from __future__ import annotations

import pytest
import torch

from depthwidth.shapes.shape import Shape

transformers = pytest.importorskip("transformers")

BASE = dict(n_layers=2, d_model=32, n_heads=4, vocab_size=256, max_seq_len=64)
LLAMA = dict(ffn="swiglu", norm="rmsnorm", pos="rope")
ARCHS = {
    "gpt2": (dict(bias="all"), "GPT2LMHeadModel"),
    "gpt2-bias-free-untied": (dict(tie_embeddings=False), "GPT2LMHeadModel"),
    "gpt2-relu-qkv-bias": (dict(ffn="relu", bias="qkv"), "GPT2LMHeadModel"),
    "llama-gqa": (dict(**LLAMA, n_kv_heads=2, rope_theta=500.0), "LlamaForCausalLM"),
    "llama-biases-head-dim": (dict(**LLAMA, bias="all", head_dim=16, tie_embeddings=False), "LlamaForCausalLM"),
    "qwen2": (dict(**LLAMA, bias="qkv", n_kv_heads=2), "Qwen2ForCausalLM"),
    "neox-parallel": (dict(pos="rope", parallel_residual=True, bias="all", tie_embeddings=False),
                      "GPTNeoXForCausalLM"),
    "neox-sequential-bias-free": (dict(pos="rope"), "GPTNeoXForCausalLM"),
}


@pytest.fixture(scope="module", params=sorted(ARCHS))
def exported(request, tmp_path_factory, corpus_file, trainer):
    """(name, our trained model, the transformers model of its export, export folder, validation tokens)."""
    from depthwidth.bench.target import load_checkpoint_model
    from depthwidth.data.dataset import load_dataset
    from depthwidth.hf.export import export_run

    changes, _ = ARCHS[request.param]
    root = tmp_path_factory.mktemp(request.param)
    trainer(root / "run", Shape(**BASE, **changes), corpus=corpus_file, seq_len=64)
    result = export_run(root / "run", root / "hf")
    assert result.finished and result.step == 8
    ours = load_checkpoint_model(root / "run").model
    theirs, info = transformers.AutoModelForCausalLM.from_pretrained(root / "hf", output_loading_info=True)
    assert not any(info.values()), info  # no missing, unexpected or mismatched tensors
    val = load_dataset(corpus=str(corpus_file), cache_dir=root / "cache").val
    tokens = torch.from_numpy(val[: 2 * 64].astype("int64")).view(2, 64)  # (2, 64)
    return request.param, ours, theirs.eval(), root / "hf", tokens


def test_the_class_of_its_family_loads_it(exported):
    name, _, theirs, _, _ = exported
    assert type(theirs).__name__ == ARCHS[name][1]
    assert next(theirs.parameters()).dtype == torch.float32


@torch.no_grad()
def test_logits_equal_ours_within_1e5(exported):
    name, ours, theirs, _, tokens = exported
    mine = ours(tokens)[0]  # (2, 64, V)
    hf = theirs(tokens).logits
    diff = (mine - hf).abs().max().item()
    print(f"{name}: max |logit diff| {diff:.2e} over {mine.numel()} logits")  # shown with pytest -s
    assert mine.shape == hf.shape
    assert diff <= 1e-5, f"{name}: max |logit diff| {diff:.2e}"


def test_greedy_generation_of_20_tokens_is_equal_token_for_token(exported):
    from depthwidth.model.generate import generate

    _, ours, theirs, _, tokens = exported
    prompt = tokens[:, :12]  # (2, 12)
    mine = generate(ours, prompt, max_new_tokens=20)
    hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20, min_new_tokens=20,
                         do_sample=False)
    assert mine.shape == (2, 32)
    assert torch.equal(mine, hf)


def test_the_export_reads_back_bit_for_bit(exported):
    from depthwidth.hfio.load import read_hf_checkpoint

    _, ours, _, folder, _ = exported
    back = read_hf_checkpoint(folder)
    assert back.shape == ours.shape  # a bias-free shape comes back bias-free
    state = ours.state_dict()
    assert set(back.state) == set(state)
    assert all(torch.equal(back.state[k], state[k]) for k in state)
