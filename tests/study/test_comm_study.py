"""End to end: a study whose one run trains over 2 gloo processes with tensor parallelism (tp = 2) stores
the run's communication, and its per-shape result has the bytes per token of the trainer's layout:
per layer and token, 2 forward and 2 backward (GELU MLP) all-reduces of d_model fp32 values."""

from __future__ import annotations

import pytest

from depthwidth.study import Store, run_study
from depthwidth.study.summary import summarize

SPEC = """
name = "tp-comm-real"
hardware = "cpu"
seeds = [0]

[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 4

[train]
steps = 4

[eval]
windows = 2

[lr]
grid = [2e-3]

[execution]
threads = 1
nproc_per_run = 2
tp = 2

[[shape]]
n_layers = 2
d_model = 32
n_heads = 2
"""


@pytest.mark.slow
def test_a_tensor_parallel_study_reports_its_communication(tiny_corpus, tmp_path):
    spec = tmp_path / "tp.toml"
    spec.write_text(SPEC.format(corpus=tiny_corpus), encoding="utf-8")
    report = run_study(spec, study_dir=tmp_path / "study")
    assert report.completed == report.total and report.failed == 0  # the training run and its bench
    with Store.open(tmp_path / "study") as store:
        (row,) = summarize(store).rows
    assert row.comm_bytes_per_token == row.predicted_comm_bytes_per_token == 2 * 32 * 4 * 4
    assert row.comm_seconds_per_token > 0 and 0 < row.comm_fraction < 1
    assert (row.comm_nproc, row.comm_tp) == (2, 2)
