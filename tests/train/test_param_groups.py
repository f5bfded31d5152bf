"""The real optimizer carries the parametrization's per-group factors: every tensor's group has the LR,
weight-decay and eps factors `multipliers` computes, and one training step of `train` moves every tensor
by exactly its group's learning rate (AdamW's first step is lr * g / (|g| + eps))."""

from __future__ import annotations

import pytest
import torch

from depthwidth.model.transformer import Transformer
from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig, train
from depthwidth.artifact.checkpoint import load_checkpoint
from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.artifact.model import run_multipliers
from depthwidth.train.optim import make_optimizer, param_role

SHAPE = Shape(n_layers=4, d_model=64, n_heads=4, vocab_size=256, max_seq_len=32, bias="all", tie_embeddings=False)


def owner_groups(optimizer) -> dict[int, dict]:
    return {id(p): g for g in optimizer.param_groups for p in g["params"]}


@pytest.mark.parametrize("name", ["mup", "completep", "depth-mup"])
def test_every_tensor_sits_in_a_group_with_its_factors(name):
    config = TrainConfig(steps=1, parametrization=name, base_width=16, base_depth=1, weight_decay=0.1, eps=1e-8)
    m = run_multipliers(SHAPE, config)  # m_N = 4, m_L = 4
    model = Transformer(SHAPE, scaling=m)
    groups = owner_groups(make_optimizer(model, config))
    roles = set()
    for pname, p in model.named_parameters():
        role, g = param_role(pname, p), groups[id(p)]
        roles.add(role)
        assert g["lr_scale"] == m.lr[role] and g["lr"] == pytest.approx(1e-3 * m.lr[role])
        assert g["eps"] == pytest.approx(1e-8 * m.eps)
        decays = p.dim() >= 2 and role != "embedding"
        assert g["weight_decay"] == pytest.approx(0.1 * m.weight_decay[role] if decays else 0.0)
    assert roles == {"embedding", "hidden", "hidden_vector", "final_norm", "head"}
    hidden = groups[id(model.blocks[0].attn.qkv.weight)]
    assert hidden["lr_scale"] == pytest.approx({"mup": 0.25, "completep": 0.25, "depth-mup": 0.125}[name])


def test_sp_keeps_its_two_groups_in_module_order():
    model = Transformer(SHAPE)
    decay, rest = make_optimizer(model, TrainConfig(steps=1)).param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    order = [n for n, _ in model.named_parameters()]
    assert [names[id(p)] for p in decay["params"]] == [n for n in order if n in {names[id(p)] for p in decay["params"]}]
    assert decay["lr_scale"] == rest["lr_scale"] == 1.0 and rest["weight_decay"] == 0.0


@pytest.mark.parametrize("name", ["sp", "completep", "depth-mup"])
def test_one_training_step_moves_each_tensor_by_its_group_lr(name, corpus_file, tmp_path):
    config = TrainConfig(corpus=str(corpus_file), seq_len=32, batch_size=4, steps=1, lr=1e-3, schedule="constant",
                         weight_decay=0.0, grad_clip=0.0, threads=1, eval_windows=4, cache_dir=str(tmp_path / "cache"),
                         peak_flops=1e11, parametrization=name, base_width=16, base_depth=1)
    r = train(SHAPE, config, out_dir=tmp_path / "run")
    assert r.status == "completed"
    m = run_multipliers(SHAPE, config)
    torch.manual_seed(config.seed)
    start = Transformer(SHAPE, scaling=m).state_dict()  # the trainer's init: same seed, same multipliers
    end = load_checkpoint(tmp_path / "run" / CHECKPOINT, device=torch.device("cpu"))["model"]
    model = Transformer(SHAPE, scaling=m)
    for pname, p in model.named_parameters():
        moved = (end[pname] - start[pname]).abs().max().item()
        assert moved == pytest.approx(1e-3 * m.lr[param_role(pname, p)], rel=2e-3), pname


def test_depth_scaling_of_a_post_norm_shape_is_refused_before_anything_is_written(corpus_file, tmp_path):
    from depthwidth.errors import UserError

    post = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32, norm_position="post")
    config = TrainConfig(corpus=str(corpus_file), seq_len=32, batch_size=4, steps=1, threads=1, eval_windows=4,
                         cache_dir=str(tmp_path / "cache"), parametrization="completep")
    with pytest.raises(UserError, match="parametrization='completep' scales pre-norm residual branches"):
        train(post, config, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_completep_run_resumed_from_a_checkpoint_equals_the_uninterrupted_run(corpus_file, tmp_path):
    """The groups' LR factors travel in the optimizer state: a resumed CompleteP run repeats every number."""
    config = TrainConfig(corpus=str(corpus_file), seq_len=32, batch_size=4, steps=6, warmup=1, checkpoint_every=3,
                         threads=1, eval_windows=4, cache_dir=str(tmp_path / "cache"), peak_flops=1e11,
                         parametrization="completep", base_width=16, base_depth=1)
    whole = train(SHAPE, config, out_dir=tmp_path / "whole")

    def stop_after_the_checkpoint(p):
        if p.phase == "train" and p.step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(SHAPE, config, out_dir=tmp_path / "cut", progress=stop_after_the_checkpoint)
    resumed = train(SHAPE, config, out_dir=tmp_path / "cut", resume=True)
    assert [(c["loss"], c["lr"], c["grad_norm"]) for c in resumed.curve] == [
        (c["loss"], c["lr"], c["grad_norm"]) for c in whole.curve]
    assert resumed.val_loss == whole.val_loss
