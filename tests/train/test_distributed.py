"""One run over two gloo processes: DDP, FSDP2 and tensor parallelism give the losses of one process with
the same global batch, the measured bytes of every collective equal the analytic ones, and a 2-process
run killed with SIGKILL resumes (with 2 processes, or with 1) to the uninterrupted losses.

One group of two ranks (started as torchrun starts a script, RANK/WORLD_SIZE set) runs every
multi-process job of this module (`dist_runs.py`); the one-process references run here."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depthwidth.data import load_dataset
from depthwidth.shapes import Shape
from depthwidth.shapes.collectives import block_tensors, root_tensors
from depthwidth.train import TrainConfig, train

from conftest import make_text

HERE = Path(__file__).parent
SHAPE = dict(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
#: tensor parallelism on every layout the head split must get right: GQA, SwiGLU, biases, RoPE
TP_SHAPE = dict(n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, ffn="swiglu", bias="all", pos="rope",
                vocab_size=256, max_seq_len=32)
KILL_STEPS = 24


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    src = str(HERE.parents[1] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(HERE), os.environ.get("PYTHONPATH", "")]),
            **extra}


def _kill_run(tmp: Path, corpus: Path, cache: Path) -> Path:
    """A 2-process `depthwidth train` run killed with SIGKILL (launcher and ranks) after its first checkpoint."""
    out = tmp / "killed"
    argv = [sys.executable, "-m", "depthwidth", "train", "--layers", "2", "--width", "32", "--heads", "2",
            "--data", str(corpus), "--seq-len", "32", "--batch-size", "4", "--steps", str(KILL_STEPS),
            "--threads", "1", "--eval-windows", "8", "--cache-dir", str(cache), "--peak-flops", "1e11",
            "--nproc", "2", "--checkpoint-every", "2", "--out", str(out), "--json"]
    proc = subprocess.Popen(argv, env=_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / "checkpoint.pt").is_file() and not (out / "result.json").is_file()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    corpus, cache = tmp / "corpus.txt", tmp / "cache"
    corpus.write_text(make_text())
    load_dataset(corpus=str(corpus), tokenizer="byte", val_fraction=0.1, test_fraction=0.0, cache_dir=str(cache))
    base = TrainConfig(corpus=str(corpus), seq_len=32, batch_size=8, micro_batch=4, steps=4, threads=1,
                       eval_windows=8, cache_dir=str(cache), peak_flops=1e11)
    killed = _kill_run(tmp, corpus, cache)
    kill_cfg = base.with_(batch_size=4, micro_batch=None, steps=KILL_STEPS, checkpoint_every=2, nproc=2)
    one_copy = tmp / "killed-one"
    shutil.copytree(killed, one_copy)
    jobs = [
        {"name": "ddp", "shape": SHAPE, "config": base.with_(nproc=2).to_dict()},
        {"name": "fsdp", "shape": SHAPE, "config": base.with_(nproc=2, parallel="fsdp").to_dict()},
        {"name": "tp", "shape": TP_SHAPE, "config": base.with_(nproc=2, tp=2).to_dict()},
        {"name": "uninterrupted", "shape": SHAPE, "config": kill_cfg.to_dict(), "out_dir": str(tmp / "ref")},
        {"name": "resumed", "shape": SHAPE, "config": kill_cfg.to_dict(), "out_dir": str(killed), "resume": True},
    ]
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    port = str(_port())
    procs = [subprocess.Popen([sys.executable, str(HERE / "dist_runs.py"), str(tmp / "jobs.json"), str(tmp)],
                              env=_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port)) for r in range(2)]
    try:
        one = {"one": train(Shape(**SHAPE), base), "tp_one": train(Shape(**TP_SHAPE), base)}
        # the killed run's DCP checkpoint resumed by ONE process (another N: DCP reshards the states)
        one["resumed_one"] = train(Shape(**SHAPE), kill_cfg.with_(nproc=1), out_dir=one_copy, resume=True)
        assert [p.wait(timeout=240) for p in procs] == [0, 0]
    finally:
        for p in procs:  # a failed rank leaves the other waiting in a collective
            if p.poll() is None:
                p.kill()
                p.wait()
    from depthwidth.train import TrainResult

    many = {j["name"]: TrainResult.from_dict(json.loads((tmp / f"{j['name']}.json").read_text())) for j in jobs}
    return {**one, **many, "killed": killed}


def _losses(result):
    assert result.status == "completed", result.error
    return [c["loss"] for c in result.curve]


def _close(a, b, rel):
    assert len(a) == len(b) and all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b)), (a, b)


def test_ddp_two_processes_give_the_losses_of_one(runs):
    _close(_losses(runs["ddp"]), _losses(runs["one"]), 1e-6)
    assert runs["ddp"].batch_stream_hash == runs["one"].batch_stream_hash
    assert abs(runs["ddp"].val_loss - runs["one"].val_loss) <= 1e-6 * runs["one"].val_loss


def test_fsdp_equals_ddp(runs):
    _close(_losses(runs["fsdp"]), _losses(runs["ddp"]), 1e-6)
    _close([c["grad_norm"] for c in runs["fsdp"].curve], [c["grad_norm"] for c in runs["ddp"].curve], 1e-5)


def test_tensor_parallel_equals_one_process(runs):
    _close(_losses(runs["tp"]), _losses(runs["tp_one"]), 1e-5)
    _close([c["grad_norm"] for c in runs["tp"].curve], [c["grad_norm"] for c in runs["tp_one"].curve], 1e-5)
    assert abs(runs["tp"].val_loss - runs["tp_one"].val_loss) <= 1e-5 * runs["tp_one"].val_loss


@pytest.mark.parametrize("name", ["ddp", "fsdp", "tp"])
def test_measured_bytes_per_collective_equal_the_analytic_bytes(runs, name):
    kinds = runs[name].comm["kinds"]
    want = {"ddp": {"all_reduce"}, "fsdp": {"all_gather", "reduce_scatter"}, "tp": {"all_reduce"}}[name]
    assert set(kinds) == want
    for kind, k in kinds.items():
        assert k["bytes_each_step"] == [k["predicted_bytes"]], (kind, k)  # every step, exactly
        assert k["bytes"] == k["predicted_bytes"] > 0
        if k["predicted_calls"] is not None:
            assert k["calls"] == k["predicted_calls"]
        assert k["seconds"] > 0
    assert 0 < runs[name].comm_fraction < 1


def test_ddp_bytes_are_every_gradient_once(runs):
    """Independent of the collectives module's sums: 4 bytes per parameter of the module (tied head once)."""
    r = runs["ddp"]
    assert r.comm["kinds"]["all_reduce"]["bytes"] == 4 * r.params
    shape = Shape(**SHAPE)
    n = sum(_prod(s) for s in block_tensors(shape)) * shape.n_layers + sum(_prod(s) for s in root_tensors(shape))
    assert n == r.params


def _prod(size):
    out = 1
    for s in size:
        out *= s
    return out


def test_sigkill_and_resume_give_the_uninterrupted_losses(runs):
    resumed, ref = runs["resumed"], runs["uninterrupted"]
    assert _losses(resumed) == _losses(ref)  # bit for bit: same processes, same order of sums
    assert resumed.val_loss == ref.val_loss and resumed.resumes and "resumed at step" in resumed.resumes[-1]
    assert not (runs["killed"] / "dcp").exists()  # the end's checkpoint holds whole tensors; DCP shards removed


def test_a_two_process_checkpoint_resumes_with_one_process(runs):
    _close(_losses(runs["resumed_one"]), _losses(runs["uninterrupted"]), 1e-5)
