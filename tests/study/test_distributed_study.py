"""A study whose runs each take two processes (`[execution] nproc_per_run = 2`): the local executor and
the Ray executor store the same losses, and those of the same study run one process per run."""

from __future__ import annotations

import sys

import pytest

from depthwidth.study import Store, run_study

SPEC = """
name = "two-proc"
hardware = "cpu"
seeds = [0]

[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8

[train]
steps = 6
checkpoint_every = 3

[eval]
windows = 4

[lr]
grid = [2e-3]

[execution]
threads = 1
{execution}

[[shape]]
n_layers = 2
d_model = 32
n_heads = 2
"""


def _spec(tmp_path, corpus, name: str, execution: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(corpus=corpus, execution=execution), encoding="utf-8")
    return path


def _losses(folder) -> dict:
    with Store.open(folder) as store:
        out = {}
        for run in store.runs(kind="train"):
            assert run.status == "completed", run.error
            out[run.run_id] = ([p.train_loss for p in store.curves(run.run_id)], store.result(run.run_id).val_loss)
        return out


@pytest.fixture(scope="module")
def local_two(tiny_corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two-proc")
    spec = _spec(tmp, tiny_corpus, "two", "nproc_per_run = 2")
    report = run_study(spec, study_dir=tmp / "local")
    assert report.completed == report.total and report.failed == 0
    return spec, tmp / "local"


def test_two_processes_per_run_store_the_losses_of_one(local_two, tiny_corpus, tmp_path):
    spec, folder = local_two
    one = tmp_path / "one"
    run_study(_spec(tmp_path, tiny_corpus, "one", ""), study_dir=one)
    two, single = _losses(folder), _losses(one)
    assert list(two) == list(single)  # nproc_per_run is how runs execute, not what they are: same run ids
    for run_id, (curve, val) in two.items():
        ref_curve, ref_val = single[run_id]
        assert len(curve) == len(ref_curve) == 6
        assert all(abs(a - b) <= 1e-6 * b for a, b in zip(curve, ref_curve)) and abs(val - ref_val) <= 1e-6 * ref_val
    with Store.open(folder) as store:
        (res,) = [store.result(r.run_id) for r in store.runs(kind="train")]
        assert res.data["config"]["nproc"] == 2 and res.data["comm"]["kinds"]["all_reduce"]["bytes"] == 4 * res.params


@pytest.mark.slow
def test_ray_executor_stores_the_losses_of_the_local_one(local_two, tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    spec, folder = local_two
    report = run_study(spec, study_dir=tmp_path / "ray", executor="ray")
    assert report.completed == report.total and report.failed == 0
    assert "per process of a run" in report.executor
    assert _losses(tmp_path / "ray") == _losses(folder)  # the same two processes, the same sums: bit for bit
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_ray_task_options_one_run_per_worker_and_resources_per_process():
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")
    from depthwidth.study.executors.ray import remote_task, run_resources
    from depthwidth.study.jobs import Job

    def job(kind="train", execution=None):
        return Job(run_id="r", kind=kind, config={}, run_dir="/tmp/x", execution=execution or {})

    assert run_resources(job(execution={"nproc": 4}), cpus_per_run=2, gpus_per_run=1) == {"num_cpus": 8,
                                                                                           "num_gpus": 4}
    assert run_resources(job(), cpus_per_run=2, gpus_per_run=0.5) == {"num_cpus": 2, "num_gpus": 0.5}
    assert run_resources(job("bench", {"nproc": 4}), cpus_per_run=1, gpus_per_run=1)["num_cpus"] == 1
    remote = remote_task(ray)
    assert remote._default_options["max_calls"] == 1


def test_a_run_on_another_kind_of_device_makes_the_study_unfair(reference, tmp_path):
    import json
    import shutil
    import sqlite3

    from depthwidth.study.fairness import check_fairness, device_kind
    from depthwidth.study.store import STORE_FILE

    assert (device_kind("cuda:1"), device_kind("cuda"), device_kind("cpu"), device_kind(None)) == (
        "cuda", "cuda", "cpu", "cpu")
    folder = tmp_path / "study"
    shutil.copytree(reference.dir, folder)
    with Store.open(folder) as store:
        runs = store.runs()
        assert check_fairness(runs, {r.run_id: store.result(r.run_id) for r in runs}).fair
        victim = store.runs(kind="train")[0].run_id
        data = store.result(victim).data
    con = sqlite3.connect(folder / STORE_FILE)
    con.execute("UPDATE results SET result = ? WHERE run_id = ?", (json.dumps({**data, "device": "cuda:0"}), victim))
    con.commit()
    con.close()
    with Store.open(folder) as store:
        runs = store.runs()
        report = check_fairness(runs, {r.run_id: store.result(r.run_id) for r in runs})
    assert not report.fair and report.fields == ("device",)
    assert set(report.findings[0].values) == {"cpu", "cuda"} and report.findings[0].values["cuda"] == [victim[:10]]
