"""A study's `[report]` rules (`study.validity`) and its baselines: the spec checks the rules' values, a
study run writes the data's unigram and bigram baselines beside its store, and the summary judges every
shape against them."""

from __future__ import annotations

import json
import math

import pytest

from depthwidth.study import run_study, summarize, Store
from depthwidth.study.jobs import Outcome
from depthwidth.study.spec import SpecError, parse_spec
from depthwidth.study.validity import MIN_TOKENS_PER_PARAM, ReportSpec

SPEC = """\
name = "gated"
seeds = [0, 1]
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 3
[lr]
grid = [1e-3]
[bench]
enabled = false
[[shape]]
n_layers = 1
d_model = 16
n_heads = 2
[[shape]]
n_layers = 2
d_model = 16
n_heads = 2
"""


def test_report_rules_defaults_and_errors():
    spec = parse_spec(SPEC.format(corpus="shakespeare"))
    assert spec.report == ReportSpec() and spec.report.min_tokens_per_param == MIN_TOKENS_PER_PARAM == 4.0
    assert spec.to_dict()["report"] == {"min_gain": 0.0, "min_tokens_per_param": 4.0, "min_scales": 3}
    text = SPEC.format(corpus="shakespeare") + "[report]\nmin_gain = 0.05\nmin_scales = 2\n"
    assert parse_spec(text).report == ReportSpec(min_gain=0.05, min_scales=2)
    for bad, key in (("min_gain = -0.1", "report.min_gain"), ("min_scales = 1", "report.min_scales"),
                     ("min_tokens_per_param = \"4\"", "report.min_tokens_per_param"), ("margin = 1", "report")):
        with pytest.raises(SpecError) as err:
            parse_spec(SPEC.format(corpus="shakespeare") + f"[report]\n{bad}\n", source="s.toml")
        assert f"s.toml:{SPEC.count(chr(10)) + 2}: {key}" in str(err.value), str(err.value)


def _bigram_side(loss_of):
    def job(job, progress=None) -> Outcome:
        t = job.config["train"]
        loss = loss_of(job.config["shape"]["n_layers"], t["seed"])
        result = {"val_loss": loss, "tokens": 96, "batch_stream_hash": f"s{t['seed']}", "train_seconds": 0.01}
        curve = ({"step": 3, "tokens": 96, "val_loss": loss},)
        return Outcome(run_id=job.run_id, status="completed", result=result, curve=curve, wall_seconds=0.01)
    return job


def test_a_study_run_writes_its_baselines_and_the_summary_judges_against_them(tmp_path, tiny_corpus):
    from depthwidth.data import load_dataset
    from depthwidth.data.baselines import compute_baselines

    path = tmp_path / "gated.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    expected = compute_baselines(load_dataset(corpus=tiny_corpus, tokenizer="byte", val_fraction=0.1))
    # one shape 0.2 nats below the bigram baseline, the other 0.1 above it
    job = _bigram_side(lambda layers, seed: expected.bigram + (0.1 if layers == 1 else -0.2) + 0.001 * seed)
    run_study(path, study_dir=tmp_path / "s", job_fn=job)
    stored = json.loads((tmp_path / "s" / "baselines.json").read_text())
    assert stored["bigram"] == pytest.approx(expected.bigram) and stored["unigram"] == pytest.approx(expected.unigram)
    with Store.open(tmp_path / "s") as store:
        summary = summarize(store)
    rows = {r.shape_label: r for r in summary.rows}
    assert rows["L1-H16-A2"].learned is False and rows["L2-H16-A2"].learned is True
    assert rows["L2-H16-A2"].bigram_gain == pytest.approx(0.2 - 0.0005)
    assert summary.baselines.bigram == pytest.approx(expected.bigram)
    assert summary.validity == (f"shapes: 1 of 2 shapes is not below the bigram baseline ({expected.bigram:.3f}): "
                                "L1-H16-A2; not learned, so left out of rankings, fits and the recommendation",)
    assert summary.validity[0] in summary.warnings
    assert math.isfinite(summary.to_dict()["baselines"]["unigram"])
