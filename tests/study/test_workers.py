"""Several runs at once in worker processes: the threads of a run are a pure function of the run and
the cores (recorded and reused on resume), the driver alone writes the store, a worker that dies is a
failed attempt retried elsewhere, a benchmark runs alone, and the stored numbers do not depend on how
many workers ran them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from depthwidth.study import Store, run_study
from depthwidth.study.jobs import Outcome
from depthwidth.study.threads import (
    ONE_THREAD_BELOW_FLOP,
    block_matmul_flop,
    default_workers,
    recorded_threads,
    run_threads,
)

SPEC = """\
name = "workers"
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 3
[lr]
grid = [1e-3, 2e-3]
[bench]
prompt_lens = [4]
contexts = [4]
batches = []
repeat = 1
[[shape]]
n_layers = 1
d_model = 16
n_heads = 2
[[shape]]
n_layers = 2
d_model = 16
n_heads = 2
"""


def stand_in(job, progress=None) -> Outcome:
    """A job for a worker process: records when it ran and with what; the first attempt of the 2-layer
    1e-3 run kills its own process (a worker that dies)."""
    folder = Path(job.run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time()
    if job.kind == "train" and job.config["shape"]["n_layers"] == 2 and job.config["train"]["lr"] == 1e-3:
        marker = folder / "died-once"
        if not marker.exists():
            marker.write_text("")
            os._exit(9)
    if progress is not None:
        progress(phase="train", step=1, steps=1, loss=1.0, tokens_per_s=None, eta_s=None)
    (folder / "started").write_text("")
    deadline = time.time() + 5  # wait (a while) for a second job to run alongside: the workers start unevenly
    while job.kind == "train" and len(list(folder.parent.glob("*/started"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    (folder / "ran.json").write_text(json.dumps({"pid": os.getpid(), "start": start, "end": time.time(),
                                                 "kind": job.kind, "threads": job.threads}))
    if job.kind == "bench":
        return Outcome(run_id=job.run_id, status="completed", result={"prefill": []}, wall_seconds=0.3)
    result = {"val_loss": 2.0 + job.config["train"]["lr"], "tokens": 96, "batch_stream_hash": "s", "train_seconds": 0.3}
    return Outcome(run_id=job.run_id, status="completed", result=result,
                   curve=({"step": 3, "tokens": 96, "val_loss": 2.0},), wall_seconds=0.3)


def crashes_in_bench(job, progress=None) -> Outcome:
    """A job whose benchmark crashes its process in native code (as libgomp does when it cannot start its
    threads); its training runs complete."""
    if job.kind == "bench":
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    return completes(job, progress)


def completes(job, progress=None) -> Outcome:
    """A job that completes at once (in this process)."""
    if job.kind == "bench":
        return Outcome(run_id=job.run_id, status="completed", result={"prefill": []})
    return Outcome(run_id=job.run_id, status="completed", result={"val_loss": 2.0, "tokens": 96},
                   curve=({"step": 3, "tokens": 96, "val_loss": 2.0},))


def _shape_config(d_model: int, *, seq: int = 128, batch: int = 16, kind: str = "train") -> dict:
    config = {"kind": kind, "shape": {"d_model": d_model}}
    if kind == "train":
        config["train"] = {"seq_len": seq, "batch_size": batch}
    return config


def test_threads_are_a_function_of_the_run_and_the_cores():
    demo = _shape_config(104)  # 2 x 2048 x 104^2 = 44 MFLOP: one thread, two such runs side by side
    assert block_matmul_flop(demo) == 2 * 128 * 16 * 104**2
    assert run_threads(demo, cores=2) == 1 and run_threads(demo, cores=16) == 1
    big = _shape_config(2048, seq=1024, batch=8)  # 69 GFLOP per block matmul: all the cores
    assert block_matmul_flop(big) > ONE_THREAD_BELOW_FLOP and run_threads(big, cores=16) == 16
    assert run_threads(_shape_config(64, kind="bench"), cores=2) == 2  # a benchmark runs alone, on all cores
    assert run_threads(big, cores=16, fixed=3) == 3  # execution.threads
    assert default_workers([1, 1, 1], cores=2) == 2 and default_workers([1], cores=8) == 1
    assert default_workers([2, 2], cores=2) == 1 and default_workers([], cores=4) == 1


def test_a_run_keeps_the_threads_its_folder_recorded(tmp_path):
    assert recorded_threads(tmp_path) is None
    (tmp_path / "run.json").write_text(json.dumps({"config": {"threads": 3}}))
    assert recorded_threads(tmp_path) == 3
    for bad in ("{not json", json.dumps({"config": {"threads": True}}), json.dumps([1])):
        (tmp_path / "run.json").write_text(bad)
        assert recorded_threads(tmp_path) is None


@pytest.fixture
def spec(tmp_path, tiny_corpus):
    path = tmp_path / "workers.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    return path


def test_workers_run_side_by_side_and_a_benchmark_alone(spec, tmp_path):
    events = []
    folder = tmp_path / "s"
    report = run_study(spec, study_dir=folder, job_fn=stand_in, workers=2, on_event=events.append)
    assert (report.completed, report.failed, report.retries) == (6, 0, 1)
    assert "2 worker processes" in report.executor
    ran = [json.loads(p.read_text()) for p in folder.glob("runs/*/ran.json")]
    assert len(ran) == 6 and len({r["pid"] for r in ran}) >= 2  # more than one worker process did the work
    train = [r for r in ran if r["kind"] == "train"]
    bench = [r for r in ran if r["kind"] == "bench"]
    assert {r["threads"] for r in train} == {1} and len(bench) == 2
    overlapping = [(a, b) for a in train for b in train if a is not b and a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping  # two training runs at once
    for b in bench:  # nothing else while a benchmark measures
        assert all(o is b or o["end"] <= b["start"] or o["start"] >= b["end"] for o in ran)
    retry = [e for e in events if e.kind == "retry"]
    assert len(retry) == 1 and "worker process died (exit code 9)" in retry[0].error
    progress = [e for e in events if e.kind == "run_progress"]
    assert progress and {e.run_id for e in progress} <= {e.run_id for e in events if e.kind == "run_start"}
    with Store.open(folder) as store:
        assert store.counts()["completed"] == 6


def test_the_stored_numbers_do_not_depend_on_the_workers(reference, numbers, tmp_path):
    # the reference ran with the default workers (2 on this machine's 2 cores: its runs take 1 thread)
    report = run_study(reference.spec, study_dir=tmp_path / "one", workers=1)
    assert report.completed == 6 and report.executor.startswith("local (1 worker process")  # never in the driver
    assert numbers(tmp_path / "one") == numbers(reference.dir)


def test_a_job_that_crashes_its_worker_is_stored_as_failed_and_never_left_running(spec, tmp_path):
    """One worker (the default for most studies): the job runs in a worker process, not in the driver, so
    a crash in native code ends the attempt, not the study; its error is stored and no row stays running."""
    folder = tmp_path / "s"
    report = run_study(spec, study_dir=folder, job_fn=crashes_in_bench, workers=1)
    assert (report.completed, report.failed, report.retries) == (4, 2, 2)
    assert report.executor == "local (1 worker process, one run at a time)"
    with Store.open(folder) as store:
        assert store.counts()["running"] == 0 and store.counts()["failed"] == 2
        errors = {r.error for r in store.runs() if r.kind == "bench"}
    assert errors == {"worker process died (killed by signal 11 (SIGSEGV))"}


def test_workers_is_refused_with_ray_and_must_be_positive(spec, cli_error, tmp_path):
    assert cli_error(["study", "run", str(spec), "--executor", "ray", "--workers", "2"]) == (
        "depthwidth study: error: --workers sets the local executor's processes; with --executor ray, "
        "Ray places the runs")
    assert "--workers" in cli_error(["study", "run", str(spec), "--workers", "0"])


def test_a_study_in_a_dtype_the_cpu_emulates_is_refused_before_its_folder(spec, tmp_path, monkeypatch):
    import depthwidth.machine.device as device_mod
    from depthwidth.errors import UserError
    from depthwidth.machine import CpuInfo, cpu_capabilities, measure

    plain = cpu_capabilities(CpuInfo(model_name="AMD EPYC 7B13", flags=frozenset({"avx2"})))
    monkeypatch.setattr(device_mod, "cpu_capabilities", lambda info=None: plain)
    real = measure.probe_gemm
    monkeypatch.setattr(measure, "probe_gemm", lambda *, dtype, device="cpu", n=128: real(
        dtype=dtype, device=device, n=n) if dtype == "fp32" else measure.GemmResult(
        dtype=dtype, path="torch.mm", n=n, seconds=2 * n**3 / 0.32e9, flops_per_s=0.32e9))
    bf16 = tmp_path / "bf16.toml"
    bf16.write_text(spec.read_text().replace("steps = 3\n", "steps = 3\ndtype = \"bf16\"\n"))
    with pytest.raises(UserError, match=r"^\[train\] dtype='bf16' is emulated here \(AMD EPYC 7B13 has no "
                                        r"avx512_bf16 or amx_bf16\): a GEMM runs \d+x slower .* use \[train\] "
                                        r"dtype='fp32', or set \[train\] allow_slow_dtype = true to run it anyway$"):
        run_study(bf16, study_dir=tmp_path / "refused", job_fn=completes)
    assert not (tmp_path / "refused").exists()
    allowed = tmp_path / "allowed.toml"
    allowed.write_text(bf16.read_text().replace("steps = 3\n", "steps = 3\nallow_slow_dtype = true\n"))
    assert run_study(allowed, study_dir=tmp_path / "allowed", job_fn=completes).completed == 6
