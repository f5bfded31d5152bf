"""Expansion: run ids are the sha256 of each run's canonical config, so growing a spec reuses every run
it already had, and every shape gets the same learning-rate trials."""

from __future__ import annotations

import hashlib
import json

from depthwidth.study import config_hash, expand, parse_spec
from depthwidth.study.expand import DataInfo

DATA = DataInfo(corpus_hash="c0ffee", vocab_size=256, train_tokens=100_000)
SPEC = """\
name = "grow"
seeds = [0]
[data]
corpus = "some.txt"
seq_len = 32
batch_size = 4
[train]
tokens = 4096
warmup = 3
[lr]
grid = [1e-3, 3e-3]
[execution]
threads = 1
[[shape]]
n_layers = 2
d_model = 32
n_heads = 2
[[shape]]
n_layers = 8
d_model = 16
n_heads = 2
"""


def runs_of(text: str):
    return expand(parse_spec(text, source="s.toml"), data=DATA).runs


def test_run_id_is_sha256_of_canonical_config():
    for run in runs_of(SPEC):
        text = json.dumps(run.config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        assert run.run_id == hashlib.sha256(text.encode()).hexdigest() == config_hash(run.config)
    train = [r for r in runs_of(SPEC) if r.kind == "train"]
    assert train[0].config["corpus_hash"] == "c0ffee" and train[0].config["train"]["tokens"] == 4096
    assert {r.config["train"]["lr"] for r in train} == {1e-3, 3e-3}


def test_growing_a_spec_keeps_every_run_id():
    base = {r.run_id for r in runs_of(SPEC)}
    more_seeds = {r.run_id for r in runs_of(SPEC.replace("seeds = [0]", "seeds = [0, 1]"))}
    more_lrs = {r.run_id for r in runs_of(SPEC.replace("grid = [1e-3, 3e-3]", "grid = [1e-3, 3e-3, 1e-2]"))}
    assert base < more_seeds and len(more_seeds) == len(base) + 4  # 2 shapes x 2 lrs for seed 1
    assert base < more_lrs and len(more_lrs) == len(base) + 2
    # execution settings are not part of a run's identity; training settings are
    assert {r.run_id for r in runs_of(SPEC.replace("threads = 1", "threads = 2"))} == base
    warm = {r.run_id for r in runs_of(SPEC.replace("warmup = 3", "warmup = 4"))}
    assert warm & base == {r.run_id for r in runs_of(SPEC) if r.kind == "bench"}


def test_centred_grid_gives_every_shape_the_same_number_of_trials():
    text = SPEC.replace("grid = [1e-3, 3e-3]", "centre = 4e-3\nreference_width = 16\nfactors = [0.5, 1, 2]")
    train = [r for r in runs_of(text) if r.kind == "train"]
    by_width: dict[int, list[float]] = {}
    for r in train:
        by_width.setdefault(r.shape.d_model, []).append(r.lr)
    assert sorted(by_width[16]) == [2e-3, 4e-3, 8e-3]
    assert sorted(by_width[32]) == [1e-3, 2e-3, 4e-3]  # 1/width scaling: half the lr at twice the width
    assert {r.lr_trials for r in train} == {3}


def test_tokens_per_param_uses_the_budget_target_for_every_member():
    text = SPEC.split("[[shape]]")[0].replace("tokens = 4096", "tokens_per_param = 2") + (
        "[[budget]]\nparams = 20_000\nalign = 8\nhead_dim = 8\ncount = 3\nmin_layers = 1\naspect_min = 1.0\n")
    expansion = expand(parse_spec(text, source="s.toml"), data=DATA)
    (group,) = expansion.groups
    assert group.label == "N20K" and group.tokens == 40_000 and len(group.shapes) >= 2
    assert {r.config["train"]["tokens"] for r in expansion.train_runs} == {40_000}
