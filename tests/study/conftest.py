"""A tiny real study shared by the study tests: 2 shapes x 2 learning rates, 24 steps each, a 60 KB
corpus, trained once per test session with the local executor (the reference the others compare to)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

TINY_SPEC = """
name = "tiny"
hardware = "cpu"

[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8

[train]
steps = 24
warmup = 2
checkpoint_every = 4

[eval]
every = 8
windows = 4

[lr]
grid = [1e-3, 4e-3]

[bench]
prompt_lens = [16]
contexts = [16]
batches = [1]
repeat = 2

[execution]
threads = 1

[[shape]]
n_layers = 1
d_model = 32
n_heads = 2

[[shape]]
n_layers = 4
d_model = 16
n_heads = 2
"""


@dataclass(frozen=True)
class Reference:
    spec: Path
    dir: Path
    seconds: float


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("".join(topics[k] for k in sorted(topics))[:60_000], encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_spec(tiny_corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "tiny.toml"
    path.write_text(TINY_SPEC.format(corpus=tiny_corpus), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def reference(tiny_spec, tmp_path_factory) -> Reference:
    from depthwidth.study import run_study

    folder = tmp_path_factory.mktemp("reference") / "study"
    # the cache folder every test of the session uses (see tests/conftest.py)
    cache = str(tmp_path_factory.getbasetemp() / "depthwidth-cache")
    before, os.environ["DEPTHWIDTH_CACHE"] = os.environ.get("DEPTHWIDTH_CACHE"), cache
    try:
        start = time.perf_counter()
        report = run_study(tiny_spec, study_dir=folder)
    finally:
        if before is None:
            os.environ.pop("DEPTHWIDTH_CACHE")
        else:
            os.environ["DEPTHWIDTH_CACHE"] = before
    assert report.completed == 6 and report.failed == 0
    return Reference(spec=tiny_spec, dir=folder, seconds=time.perf_counter() - start)


@pytest.fixture(scope="session")
def numbers():
    """The function `stored_numbers` (tests take it as a fixture: test folders are not packages)."""
    return stored_numbers


def stored_numbers(folder: Path) -> dict:
    """Everything a run stores that must not depend on timing: per training run its losses, stream hash
    and curve (step, tokens, train/val loss, lr, grad norm)."""
    from depthwidth.study import Store

    out = {}
    with Store.open(folder) as store:
        for run in store.runs(kind="train"):
            res = store.result(run.run_id)
            curve = [(p.step, p.tokens, p.train_loss, p.val_loss, p.lr, p.grad_norm) for p in store.curves(run.run_id)]
            out[run.run_id] = {
                "status": run.status,
                "val_loss": res.val_loss if res else None,
                "by_slice": res.data.get("val_loss_by_slice") if res else None,
                "by_position": res.data.get("val_loss_by_position") if res else None,
                "stream": res.batch_stream_hash if res else None,
                "tokens": res.tokens if res else None,
                "curve": curve,
            }
    return out
