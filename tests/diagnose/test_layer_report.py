"""The layer report against Hugging Face models made by `transformers` itself: dropping block l through our
import gives the loss of the HF model with that block removed from its ModuleList; the logit lens at the
last block is the model's loss; block influence and angular distances equal a direct computation on the
HF model's hidden states; a block whose output projections are zero is the first the greedy search removes."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from depthwidth.diagnose.layers import layer_report, loss_without, trial_losses
from depthwidth.hfio.load import load_hf_model

transformers = pytest.importorskip("transformers")

N_LAYERS = 4
CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=N_LAYERS, n_head=4, n_positions=48),
    "llama": lambda: transformers.LlamaConfig(vocab_size=96, hidden_size=32, num_hidden_layers=N_LAYERS,
                                              num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                                              max_position_embeddings=48, rope_theta=1000.0),
}


def _layers(model):
    return model.transformer.h if hasattr(model, "transformer") else model.model.layers


def _save(model_type: str, folder, *, zero_block: int | None = None):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[model_type]()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        if zero_block is not None:
            block = _layers(model)[zero_block]
            outs = ([block.attn.c_proj, block.mlp.c_proj] if model_type == "gpt2"
                    else [block.self_attn.o_proj, block.mlp.down_proj])
            for lin in outs:
                lin.weight.zero_()
                if lin.bias is not None:
                    lin.bias.zero_()
    model.save_pretrained(folder)
    return model


def _windows(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 96, (5, 33), generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


def _hf_loss(model, x, y) -> float:
    logits = model(x, use_cache=False).logits
    return float(F.cross_entropy(logits.flatten(0, 1), y.flatten()))


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
@torch.no_grad()
def test_drop_a_layer_equals_the_hf_model_without_that_layer(model_type, tmp_path):
    hf = _save(model_type, tmp_path)
    ours, _ = load_hf_model(tmp_path)
    x, y = _windows()
    report = layer_report(ours, inputs=x, targets=y, batch_size=2, greedy=False)
    full = _hf_loss(hf, x, y)
    assert report.loss == pytest.approx(full, abs=1e-5)
    layers = _layers(hf)
    kept = list(layers)
    for k in range(N_LAYERS):
        hf_layers = torch.nn.ModuleList(b for i, b in enumerate(kept) if i != k)
        _set_layers(hf, hf_layers)
        assert report.drop_increase[k] + report.loss == pytest.approx(_hf_loss(hf, x, y), abs=1e-5)
        if k < N_LAYERS - 1:
            _set_layers(hf, torch.nn.ModuleList(b for i, b in enumerate(kept) if i not in (k, k + 1)))
            assert report.pair_increase[k] + report.loss == pytest.approx(_hf_loss(hf, x, y), abs=1e-5)
    _set_layers(hf, torch.nn.ModuleList(kept))
    assert report.lens_loss[-1] == pytest.approx(report.loss, abs=1e-6)
    assert report.lens_kl[-1] == pytest.approx(0.0, abs=1e-6)
    assert all(v > 0 for v in report.lens_kl[:-1])


def _set_layers(hf, layers) -> None:
    if hasattr(hf, "transformer"):
        hf.transformer.h = layers
    else:
        hf.model.layers = layers
        for i, layer in enumerate(layers):  # the cache index of each attention layer
            layer.self_attn.layer_idx = i
    hf.config.num_hidden_layers = len(layers)
    if hasattr(hf.config, "n_layer"):
        hf.config.n_layer = len(layers)


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
@torch.no_grad()
def test_block_influence_and_angular_distance_match_the_hidden_states(model_type, tmp_path):
    hf = _save(model_type, tmp_path)
    ours, _ = load_hf_model(tmp_path)
    x, y = _windows(2)
    report = layer_report(ours, inputs=x, targets=y, batch_size=5, greedy=False)
    captured = {}
    handle = _layers(hf)[-1].register_forward_hook(
        lambda m, i, o: captured.__setitem__("last", o[0] if isinstance(o, tuple) else o))
    states = list(hf(x, output_hidden_states=True, use_cache=False).hidden_states)
    handle.remove()
    states[-1] = captured["last"]  # HF's last hidden state is after the final norm; ours is x_L, before it
    for n in (1, 2, 4):
        for l in range(N_LAYERS):
            got = report.angular[n][l]
            if l + n > N_LAYERS:
                assert got is None
                continue
            cos = F.cosine_similarity(states[l], states[l + n], dim=-1).clamp(-1, 1)
            assert got == pytest.approx(float((torch.arccos(cos) / math.pi).mean()), abs=1e-5)
            if n == 1:
                assert report.block_influence[l] == pytest.approx(1 - float(cos.mean()), abs=1e-5)


@torch.no_grad()
def test_a_zeroed_block_is_removed_first_and_costs_nothing(tmp_path):
    _save("llama", tmp_path, zero_block=2)
    ours, _ = load_hf_model(tmp_path)
    x, y = _windows(3)
    report = layer_report(ours, inputs=x, targets=y, tolerance=0.0)
    assert report.drop_increase[2] == pytest.approx(0.0, abs=1e-6)
    assert report.attn_ratio[2] == 0.0 and report.mlp_ratio[2] == 0.0
    assert report.removed[0] == 2 and report.removed_increase[0] == pytest.approx(0.0, abs=1e-6)
    loose = layer_report(ours, inputs=x, targets=y, tolerance=10.0, greedy=True)
    assert loose.effective_depth == 0 and sorted(loose.removed) == list(range(N_LAYERS))
    assert loose.removed_increase[-1] == pytest.approx(
        loss_without(ours, inputs=x, targets=y, skip=range(N_LAYERS)) - loose.loss, abs=1e-9)
    assert loose.to_dict()["effective_depth"] == 0
    # a greedy round resumes each trial from its block's input: the numbers of a whole forward without them
    trials = trial_losses(ours, inputs=x, targets=y, removed=[2], candidates=[0, 1, 3], batch_size=2)
    for j, value in trials.items():
        assert value == pytest.approx(loss_without(ours, inputs=x, targets=y, skip=[2, j]), abs=1e-12)


@torch.no_grad()
def test_block_parts_is_the_block_forward_for_every_block_form():
    from depthwidth.diagnose.layers import block_parts
    from depthwidth.model.transformer import Transformer
    from depthwidth.shapes.shape import Shape

    base = Shape(n_layers=2, d_model=32, n_heads=4, vocab_size=64, max_seq_len=16)
    for shape in (base, base.with_(parallel_residual=True), base.with_(norm_position="post")):
        torch.manual_seed(0)
        model = Transformer(shape).eval()
        x = torch.randn(2, 8, 32)  # (B, T, D)
        rope = (model.rope_cos, model.rope_sin) if shape.pos == "rope" else None
        out, a, u, ra, rm = block_parts(model.blocks[0], x, rope=rope)
        torch.testing.assert_close(out, model.blocks[0](x, rope=rope), rtol=0, atol=1e-6)
        assert ra > 0 and rm > 0
