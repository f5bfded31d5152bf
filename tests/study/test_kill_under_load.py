"""A study killed with SIGKILL at a random moment while other processes load the machine, and started
again under a different load, stores exactly the losses of an uninterrupted study: the threads of a run
depend on the run and the cores only, never on the load, and a resumed run keeps the count it started
with. The killed driver's worker processes end with it. A few trials here, 20 in the slow test."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import psutil
import pytest
from test_kill_resume import finished_runs

SPEC = """
name = "loaded"
hardware = "cpu"
seeds = {seeds}
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8
[train]
steps = {steps}
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
[[shape]]
n_layers = 1
d_model = 32
n_heads = 2
[[shape]]
n_layers = 3
d_model = 16
n_heads = 2
"""
#: the default run's study (4 training runs of 8 steps, 0 or 1 busy core) and the slow test's (8 of 16, 0-2)
SMALL, FULL = {"seeds": [0], "steps": 8, "loads": [0, 1]}, {"seeds": [0, 1], "steps": 16, "loads": [0, 1, 2]}
BURN = "import os, time\nend = time.time() + 600\nwhile time.time() < end and os.getppid() != 1: pass\n"


def study(spec, folder) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "depthwidth", "study", "run", str(spec), "--dir", str(folder),
                             "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Load:
    """`n` processes that each keep a core busy, for the life of the `with` block."""

    def __init__(self, n: int) -> None:
        self.n, self.procs = n, []

    def __enter__(self) -> Load:
        self.procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def _reference(corpus, root, size: dict):
    spec = root / "loaded.toml"
    spec.write_text(SPEC.format(corpus=corpus, seeds=size["seeds"], steps=size["steps"]))
    reference = root / "reference"
    proc = study(spec, reference)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return spec, reference, 4 * len(size["seeds"]), size["loads"]


@pytest.fixture(scope="module")
def small(tiny_corpus, tmp_path_factory):
    return _reference(tiny_corpus, tmp_path_factory.mktemp("small"), SMALL)


@pytest.fixture(scope="module")
def full(tiny_corpus, tmp_path_factory):
    return _reference(tiny_corpus, tmp_path_factory.mktemp("full"), FULL)


def trial(spec, reference, runs, loads, folder, numbers, rng: random.Random) -> str:
    before, after = rng.sample(loads, 2)  # busy cores before the kill and after the restart
    target, delay = rng.randint(0, runs - 1), rng.uniform(0.0, 2.0)
    where = f"load {before} then {after}, kill after {target} runs + {delay:.2f} s"
    with Load(before):
        proc = study(spec, folder)
        deadline = time.monotonic() + 300
        while len(finished_runs(folder)) < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        workers = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)] if proc.poll() is None else []
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if proc.returncode != -signal.SIGKILL:
        return f"the study ended before the kill ({where})"
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in workers):
        assert time.monotonic() < deadline, f"a worker outlived its killed driver ({where})"
        time.sleep(0.05)
    with Load(after):
        again = study(spec, folder)
        _, err = again.communicate(timeout=600)
    assert again.returncode == 0, f"{where}: {err.decode()[-500:]}"
    assert numbers(folder) == numbers(reference), where
    return where


@pytest.mark.slow  # studies under load: ~25 s on 2 cores
def test_killed_under_one_load_restarted_under_another(small, numbers, tmp_path):
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}:", trial(*small, tmp_path / "t0", numbers, random.Random(seed)))


@pytest.mark.slow
def test_twenty_kills_under_changing_load(full, numbers, tmp_path):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    outcomes = [trial(*full, tmp_path / f"t{i}", numbers, rng) for i in range(20)]
    ended = [o for o in outcomes if o.startswith("the study ended")]
    print(f"seed {seed}:", *outcomes, sep="\n  ")
    assert len(ended) <= 2, f"seed {seed}: too many kills came after the end: {ended}"
