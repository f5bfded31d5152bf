"""A run trained under muP/CompleteP exports with its forward multipliers (residual branch, output logits,
1/head_dim attention) folded into the weights: `transformers` loads the class of its shape and computes
our logits to fp32 rounding, for GPT-2 and Llama shapes, tied and untied heads (and GPT-NeoX's parallel
residual); config.json records what was folded; what no weight can hold is refused in one line."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from depthwidth.errors import UserError
from depthwidth.shapes import Shape

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

BASE = dict(n_layers=2, d_model=32, n_heads=4, vocab_size=256, max_seq_len=32)
LLAMA = dict(ffn="swiglu", norm="rmsnorm", pos="rope")
SHAPES = {
    "gpt2-tied": (dict(bias="all"), "GPT2LMHeadModel"),
    "gpt2-untied": (dict(tie_embeddings=False), "GPT2LMHeadModel"),
    "llama-gqa-untied": (dict(**LLAMA, n_kv_heads=2, tie_embeddings=False), "LlamaForCausalLM"),
    "llama-tied": (dict(**LLAMA), "LlamaForCausalLM"),
    "neox-parallel": (dict(pos="rope", parallel_residual=True, bias="all"), "GPTNeoXForCausalLM"),
}
#: (shape, parametrization): SP, muP and CompleteP on one GPT-2 and one Llama shape; CompleteP on the rest
CASES = [(s, p) for s in ("gpt2-tied", "llama-gqa-untied") for p in ("sp", "mup", "completep")]
CASES += [("gpt2-untied", "completep"), ("llama-tied", "completep"), ("neox-parallel", "depth-mup")]
BASES = dict(base_width=16, base_depth=1)  # m_N = 2, m_L = 2: every multiplier differs from 1


@pytest.fixture(scope="module", params=CASES, ids=[f"{s}-{p}" for s, p in CASES])
def exported(request, tmp_path_factory, corpus_file, trainer):
    """(shape name, our trained model, the transformers model of its export, export folder, tokens)."""
    from depthwidth.artifact.load import load_trained
    from depthwidth.data.dataset import load_dataset
    from depthwidth.hf.export import export_run

    name, parametrization = request.param
    root = tmp_path_factory.mktemp(f"{name}-{parametrization}")
    extra = {} if parametrization == "sp" else BASES
    result = trainer(root / "run", Shape(**BASE, **SHAPES[name][0]), corpus=corpus_file, steps=3,
                     parametrization=parametrization, **extra)
    assert result.status == "completed"
    export_run(root / "run", root / "hf")
    ours = load_trained(root / "run").model
    theirs, info = transformers.AutoModelForCausalLM.from_pretrained(root / "hf", torch_dtype=torch.float32,
                                                                     output_loading_info=True)
    assert not any(info.values()), info
    val = load_dataset(corpus=str(corpus_file), cache_dir=root / "cache").val
    tokens = torch.from_numpy(val[: 2 * 32].astype("int64")).view(2, 32)  # (2, 32)
    return name, ours, theirs.eval(), root / "hf", tokens


@torch.no_grad()
def test_transformers_computes_our_logits_to_fp32_rounding(exported):
    name, ours, theirs, _, tokens = exported
    case = f"{name} {ours.scaling.parametrization}"
    assert type(theirs).__name__ == SHAPES[name][1]
    mine = ours(tokens)[0]  # (2, 32, V)
    hf = theirs(tokens).logits
    scale = mine.abs().max().item()
    diff = (mine - hf).abs().max().item()
    print(f"{case}: max |logit diff| {diff:.2e}, max |logit| {scale:.2f}")  # shown with pytest -s
    assert mine.shape == hf.shape
    assert diff <= 1e-5 * max(1.0, scale), f"{case}: max |logit diff| {diff:.2e} (logits up to {scale:.2f})"


@torch.no_grad()
def test_the_multipliers_matter_so_the_fold_is_what_makes_it_equal(exported):
    from depthwidth.model.transformer import Transformer

    case, ours, _, _, tokens = exported
    if ours.scaling.is_sp:
        pytest.skip("SP has no multiplier")
    plain = Transformer(ours.shape).eval()  # the run's weights in the standard forward
    plain.load_state_dict(ours.state_dict())
    assert (plain(tokens)[0] - ours(tokens)[0]).abs().max().item() > 1e-3, case


def test_config_json_records_the_parametrization_and_what_was_folded(exported):
    case, ours, _, folder, _ = exported
    record = json.loads((folder / "config.json").read_text())["depthwidth"]["parametrization"]
    m = ours.scaling
    assert record["name"] == m.parametrization
    folded = record["folded"]
    if m.is_sp:
        assert folded == {}
        return
    assert folded["logit_mult"]["value"] == pytest.approx(m.logit_mult) == pytest.approx(0.5)
    assert folded["logit_mult"]["into"].startswith("final_norm") == ours.shape.tie_embeddings
    assert folded["attn_scale"]["query_factor"] == pytest.approx(ours.shape.head_dim ** -0.5)
    assert ("residual_mult" in folded) == (m.alpha > 0)
    if m.alpha:
        assert folded["residual_mult"]["value"] == pytest.approx(2 ** -m.alpha)


@torch.no_grad()
def test_the_export_imports_as_a_standard_model_with_the_same_logits(exported):
    from depthwidth.hfio.load import load_hf_model

    case, ours, _, folder, tokens = exported
    model, _ = load_hf_model(folder)
    assert model.scaling.is_sp
    diff = (model(tokens)[0] - ours(tokens)[0]).abs().max().item()
    assert diff <= 1e-5 * max(1.0, ours(tokens)[0].abs().max().item()), f"{case}: {diff:.2e}"


def _multipliers(shape: Shape, parametrization: str = "completep"):
    from depthwidth.shapes.parametrization import multipliers

    return multipliers(parametrization, d_model=shape.d_model, n_layers=shape.n_layers, head_dim=shape.head_dim,
                       base_width=16, base_depth=1, norm_position=shape.norm_position)


def test_a_tied_head_without_a_final_norm_is_refused_in_one_line():
    from depthwidth.hf.fold import fold_multipliers
    from depthwidth.model.transformer import Transformer

    shape = Shape(**BASE, final_norm=False)
    state = Transformer(shape).state_dict()
    with pytest.raises(UserError, match="logit multiplier 0.5 has no weight") as err:
        fold_multipliers(state, shape, _multipliers(shape))
    assert "tie_embeddings=True" in str(err.value) and "final_norm=False" in str(err.value)
    assert "\n" not in str(err.value)
    fold_multipliers(state, shape, _multipliers(shape, "sp"))  # no multiplier: nothing to hold


def test_a_factor_that_is_not_finite_is_refused_in_one_line():
    from depthwidth.hf.fold import fold_multipliers
    from depthwidth.model.transformer import Transformer

    shape = Shape(**BASE)
    bad = dataclasses.replace(_multipliers(shape), residual_mult=float("inf"))
    with pytest.raises(UserError, match="residual_mult=inf is not finite") as err:
        fold_multipliers(Transformer(shape).state_dict(), shape, bad)
    assert "\n" not in str(err.value)


def test_the_fold_leaves_its_input_alone_and_scales_only_the_query_rows():
    from depthwidth.hf.fold import fold_multipliers
    from depthwidth.model.transformer import Transformer

    shape = Shape(**BASE, bias="all")
    state = {k: torch.randn_like(v) for k, v in Transformer(shape).state_dict().items()}  # biases not zero
    before = {k: v.clone() for k, v in state.items()}
    out = fold_multipliers(state, shape, _multipliers(shape)).state
    assert all(torch.equal(state[k], before[k]) for k in state)
    qkv, q = out["blocks.0.attn.qkv.weight"], shape.q_dim
    assert torch.allclose(qkv[:q], before["blocks.0.attn.qkv.weight"][:q] * shape.head_dim ** -0.5)
    assert torch.equal(qkv[q:], before["blocks.0.attn.qkv.weight"][q:])
    assert torch.allclose(out["blocks.1.mlp.down.bias"], before["blocks.1.mlp.down.bias"] * 0.5)
    assert torch.allclose(out["final_norm.weight"], before["final_norm.weight"] * 0.5)
    assert torch.equal(out["embed.weight"], before["embed.weight"])  # tied: the input embedding is untouched
