"""A study with `[train] horizons`: one WSD run per (shape, lr, seed) also stores each earlier horizon's
cooldown branch as the standalone run of that length (its id, its numbers), in a horizon group that keeps
the full horizon's learning rate; killed and resumed it stores exactly what an uninterrupted study does."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from depthwidth.study import Store, run_study
from depthwidth.study.expand import expand
from depthwidth.study.horizons import extra_cost, split_horizon
from depthwidth.study.selection import select_lrs
from depthwidth.study.spec import parse_spec

SPEC = """
name = "hz"
hardware = "cpu"
seeds = [0]

[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8

[train]
steps = {steps}
warmup = 2
checkpoint_every = 4
schedule = "wsd"
{horizons}

[eval]
every = 8
windows = 4

[lr]
grid = [1e-3, 4e-3]

[bench]
enabled = false

[execution]
threads = 1

[[shape]]
n_layers = 1
d_model = 32
n_heads = 2

[[shape]]
n_layers = 3
d_model = 16
n_heads = 2
"""


def spec_text(corpus, *, steps=20, horizons="horizons = [0.5, 1.0]") -> str:
    return SPEC.format(corpus=corpus, steps=steps, horizons=horizons)


@pytest.fixture(scope="module")
def hz_spec(tiny_corpus, tmp_path_factory):
    path = tmp_path_factory.mktemp("hz") / "hz.toml"
    path.write_text(spec_text(tiny_corpus), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hz_reference(hz_spec, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hz-ref") / "study"
    report = run_study(hz_spec, study_dir=folder)
    assert (report.completed, report.failed, report.total) == (8, 0, 8)
    return folder


def test_expansion_has_one_horizon_group_whose_runs_are_the_standalone_runs(tiny_corpus):
    expansion = expand(parse_spec(spec_text(tiny_corpus)))
    assert [g.label for g in expansion.groups] == ["shapes", "shapes@0.5"]
    assert [g.tokens for g in expansion.groups] == [20 * 256, 10 * 256]
    parents = [r for r in expansion.train_runs if r.parent is None]
    branches = [r for r in expansion.train_runs if r.parent is not None]
    assert len(parents) == len(branches) == 4
    assert {b.parent for b in branches} == {p.run_id for p in parents}
    assert all(b.group == "shapes@0.5" and b.horizon == 0.5 for b in branches)
    # the same spec with 10 steps and no horizons asks for exactly the branches (same ids, same configs)
    short = expand(parse_spec(spec_text(tiny_corpus, steps=10, horizons="")))
    assert sorted(r.run_id for r in short.train_runs) == sorted(b.run_id for b in branches)
    assert split_horizon("shapes@0.5") == ("shapes", 0.5) and split_horizon("shapes") is None


def test_extra_cost_counts_only_the_cooldowns(tiny_corpus):
    from depthwidth.study.run_config import train_config_of

    expansion = expand(parse_spec(spec_text(tiny_corpus, steps=100, horizons="horizons = [0.25, 0.5, 1.0]")))
    parent = next(r for r in expansion.train_runs if r.parent is None)
    assert extra_cost(train_config_of(parent.config)) == pytest.approx((5 + 10) / 100)  # 0.2 of 25 and of 50 steps


def test_branches_are_stored_with_the_numbers_of_the_standalone_run(hz_reference, tiny_corpus, tmp_path, numbers):
    short = tmp_path / "short.toml"
    short.write_text(spec_text(tiny_corpus, steps=10, horizons=""), encoding="utf-8")
    alone = tmp_path / "alone"
    assert run_study(short, study_dir=alone).completed == 4
    ref, own = numbers(hz_reference), numbers(alone)
    for run_id, values in own.items():
        assert ref[run_id] == values  # loss, slices, stream hash and curve, bit for bit
    with Store.open(hz_reference) as store:
        groups = {r.run_id: r.group for r in store.runs(kind="train")}
    assert {groups[i] for i in own} == {"shapes@0.5"}


def test_a_horizon_keeps_the_learning_rate_chosen_at_the_full_horizon(hz_reference):
    with Store.open(hz_reference) as store:
        runs, results = store.runs(), {r.run_id: r for r in store.results()}
    choices = {(c.group, c.shape_label): c for c in select_lrs(runs, results)}
    for (group, label), choice in choices.items():
        if split_horizon(group) is None:
            continue
        full = choices[("shapes", label)]
        assert choice.best_lr == full.best_lr and choice.chosen_at == "shapes"
        at_lr = {t.lr: t.mean_loss for t in choice.trials}
        assert choice.best_loss == at_lr[full.best_lr]  # even where another lr is lower at this horizon


@pytest.mark.slow  # two studies and a kill: ~15 s on 2 cores
def test_resume_after_a_kill_stores_the_same_numbers_branches_included(hz_spec, hz_reference, tmp_path, numbers):
    folder = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "depthwidth", "study", "run", str(hz_spec), "--dir", str(folder),
                             "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    # kill once a parent's branch has begun: the first horizon checkpoint is in a run folder
    while proc.poll() is None and time.monotonic() < deadline:
        if any(folder.glob("runs/*/horizons/0.5/result.json")) or any(folder.glob("runs/*/horizons/0.5/*.pt")):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    report = run_study(hz_spec, study_dir=folder)
    assert report.failed == 0
    assert numbers(folder) == numbers(hz_reference)
    with Store.open(folder) as store:
        assert store.counts()["completed"] == 8


def test_a_parent_that_diverges_before_a_branch_leaves_it_diverged(tiny_corpus, tmp_path):
    text = spec_text(tiny_corpus).replace("grid = [1e-3, 4e-3]", "grid = [10.0]").replace(
        "warmup = 2", "warmup = 1\ndiverge_factor = 1.05")
    spec = tmp_path / "div.toml"
    spec.write_text(text, encoding="utf-8")
    report = run_study(spec, study_dir=tmp_path / "div")
    with Store.open(tmp_path / "div") as store:
        rows = {r.run_id: r for r in store.runs(kind="train")}
        results = {r.run_id: r for r in store.results()}
    assert report.failed == 0 and len(rows) == 4
    for run in rows.values():
        assert run.status in ("diverged", "completed")
    branches = [r for r in rows.values() if split_horizon(r.group)]
    parents = [r for r in rows.values() if not split_horizon(r.group)]
    assert all(p.status == "diverged" for p in parents)
    assert len(branches) == 2
    for b in branches:  # lr 10 diverges in the first steps, before the branch's cooldown at step 8
        assert b.status == "diverged"
        assert "the run it branches from diverged at step" in results[b.run_id].data["error"]


def test_the_report_ranks_the_shapes_at_each_horizon(hz_reference, tmp_path):
    from depthwidth.report.build import build_report
    from depthwidth.report.data import load_study
    from depthwidth.report.export import write_report

    import shutil

    from depthwidth.data.baselines import NgramBaselines
    from depthwidth.study.baselines import write_baselines

    # 20 steps do not get below the data's bigram baseline: the ranking against budget leaves every point out
    gated = build_report(load_study(hz_reference), hardware="h100", n_bootstrap=20)
    assert gated.budgets.ladders == ()
    assert any(w.startswith("shapes: 4 point(s) not below the bigram baseline are left out of the ranking")
               for w in gated.budgets.warnings)
    # the same runs judged against a baseline they are all below: the ranking itself
    folder = tmp_path / "copy"
    shutil.copytree(hz_reference, folder)
    write_baselines(folder, NgramBaselines(dataset_hash="x", vocab_size=256, smoothing="synthetic", unigram=11.0,
                                           bigram=10.0, targets=1))
    report = build_report(load_study(folder), hardware="h100", n_bootstrap=20)
    (lad,) = report.budgets.ladders
    assert lad.group == "shapes"
    assert sorted({(p.shape_label, p.tokens) for p in lad.points}) == sorted(
        (label, t) for label in ("L1-H32-A2", "L3-H16-A2") for t in (2560, 5120))
    assert all(p.seconds is not None and p.seconds > 0 for p in lad.points)
    assert len(lad.verdicts) == 2 and lad.verdicts[0].startswith("at ")
    files = write_report(report, tmp_path / "report")
    assert "budgets.png" in {f.png.name for f in files.figures}
    page = files.html.read_text()
    assert 'id="budgets"' in page and "chosen at the full horizon" in page
