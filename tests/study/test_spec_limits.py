"""Every size and list a study spec sets has a bound with its reason: a typo (200,000 seeds, a 100,000-value
learning-rate grid, threads = 100000, an LR of 1e300) is refused by `study validate` at once, in one line
naming the file, the line, the key, the bound and why, in bounded time and memory; what validates can run
(a study's local run refuses, before its folder is touched, what this machine cannot run)."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from depthwidth.study import parse_spec
from depthwidth.study.limits import LIMITS, run_count

SPEC = """\
name = "limits"
hardware = "cpu"
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 4
[train]
steps = 2
[lr]
grid = [1e-3]
[bench]
prompt_lens = [4]
contexts = [4]
batches = [1]
repeat = 1
[execution]
threads = 1
[[shape]]
n_layers = 1
d_model = 16
n_heads = 2
"""


@pytest.fixture
def write(tmp_path, tiny_corpus):
    """write(old, new) -> the path of SPEC with `old` replaced by `new`."""

    def make(old: str = "", new: str = "", *, top: str = ""):
        text = top + SPEC.format(corpus=tiny_corpus)
        if old:
            assert old in text
            text = text.replace(old, new)
        path = tmp_path / "spec.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return make


def bounded_validate(cli_error, path, *, memory: bool = False) -> str:
    """`study validate PATH`: its one line, asserting it took under 3 s (and, with `memory`, under 64 MiB
    of Python allocations at its peak, measured in a second call: tracing slows the first)."""
    start = time.perf_counter()
    line = cli_error(["study", "validate", str(path)])
    assert time.perf_counter() - start < 3, line
    if memory:
        tracemalloc.start()
        try:
            assert cli_error(["study", "validate", str(path)]) == line
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 2**20, (peak, line)
    return line


def test_the_base_spec_is_valid(write):
    spec = parse_spec(write().read_text(), source="spec.toml")
    assert run_count(spec)[0] == 1


def test_threads_100000_is_refused_by_validate(write, cli_error):
    line = bounded_validate(cli_error, write("threads = 1", "threads = 100000"))
    assert line.endswith(":17: execution.threads: expected an integer in [1, 4,096] (more threads than any "
                         "machine has cores), got 100000")


def test_200000_seeds_are_refused_at_once(write, cli_error):
    line = bounded_validate(cli_error, write(top="seeds = [" + ",".join(map(str, range(200_000))) + "]\n"), memory=True)
    assert line.endswith(":1: seeds: expected an array of at most 1,024 values (a study trains every shape and "
                         "learning rate once per seed; studies use 1 to 5), got 200,000")


def test_a_100000_value_lr_grid_is_refused(write, cli_error):
    grid = ", ".join(f"{1e-4 * (1 + i / 1e5):.9g}" for i in range(100_000))
    line = bounded_validate(cli_error, write("grid = [1e-3]", f"grid = [{grid}]"), memory=True)
    assert ":10: lr.grid: expected an array of at most 64 values (learning rates per shape:" in line
    assert line.endswith("got 100,000")


@pytest.mark.parametrize("old,new,key", [
    ("grid = [1e-3]", "grid = [1e-3, 1e300]", "lr.grid: item 1: expected a number > 0 and <= 10 (about 100x"),
    ("grid = [1e-3]", "centre = 1e300\nreference_width = 16", "lr.centre: expected a number > 0 and <= 10"),
    ("grid = [1e-3]", 'grid = [1e-3]\nsearch = "bracket"\nmax_trials = 3\nstep = 1e300',
     "lr.step: expected a number > 1 and <= 100 (the ratio between a bracket's neighbouring learning rates"),
])
def test_learning_rates_and_the_bracket_step_are_bounded(write, cli_error, old, new, key):
    assert key in bounded_validate(cli_error, write(old, new))


def test_a_centred_grid_above_the_lr_bound_names_its_key(write, cli_error):
    line = bounded_validate(cli_error, write("grid = [1e-3]", "centre = 8.0\nreference_width = 64\nfactors = [1.0]"))
    assert "lr: lr=32.0 is above the limit of 10 (about 100x the largest peak learning rate" in line


@pytest.mark.parametrize("old,new,key", [
    ("batches = [1]", "batches = [1000000000]", "bench.batches: item 0: expected an integer in [1, 65,536]"),
    ("batches = [1]", "batches = [" + ",".join(map(str, range(1, 100))) + "]",
     "bench.batches: expected an array of at most 64 values"),
    ("prompt_lens = [4]", "prompt_lens = [" + ",".join(map(str, range(1, 30))) + ", 1000000000]",
     "bench.prompt_lens: item 29: expected an integer in [1, 134,217,728] (the longest context a Shape may have)"),
    ("repeat = 1", "repeat = 1000000000", "bench.repeat: expected an integer in [1, 10,000]"),
    ("threads = 1", "workers = 100000", "execution.workers: expected an integer in [1, 1,024]"),
    ("threads = 1", "cpus_per_run = 100000", "execution.cpus_per_run: expected an integer in [1, 4,096]"),
    ("threads = 1", "gpus_per_run = 1e9", "execution.gpus_per_run: expected a number >= 0 and <= 64"),
    ("n_heads = 2\n", "n_heads = 2\n[[budget]]\nparams = 30000\ndepths = [" + ",".join(map(str, range(1, 80))) + "]\n",
     "budget[0].depths: expected an array of at most 64 values"),
])
def test_every_bench_and_execution_size_is_bounded(write, cli_error, old, new, key):
    assert key in bounded_validate(cli_error, write(old, new))


def test_the_number_of_runs_is_bounded(write, cli_error):
    grid = ", ".join(f"{k}e-4" for k in range(1, 21))
    line = bounded_validate(cli_error, write("grid = [1e-3]", f"grid = [{grid}]",
                                             top="seeds = [" + ",".join(map(str, range(600))) + "]\n"))
    assert line.endswith(":1: seeds: the study asks for up to 12,000 training runs (1 shape(s) x 20 learning "
                         "rate(s) x 600 seed(s)), above the limit of 10,000 (25x the models of the largest "
                         "published shape studies, about 400)")
    assert LIMITS["runs"][0] == 10_000


def test_so_many_shape_tables_are_refused_before_they_are_read(write, cli_error):
    tables = "".join(f"[[shape]]\nn_layers = {i}\nd_model = 16\nn_heads = 2\n" for i in range(1, 5000))
    line = bounded_validate(cli_error, write("n_heads = 2\n", "n_heads = 2\n" + tables))
    assert "shape: 5,000 [[shape]] tables, above the limit of 4,096" in line


def test_a_throughput_that_cannot_fit_the_models_is_refused(write, cli_error):
    path = write("seq_len = 32", "seq_len = 16")
    line = bounded_validate(cli_error, path)
    assert line.endswith("bench.batches: a throughput point prompts 16 tokens and generates 16, 32 positions, more "
                         "than the models' max_seq_len=16 (set model.max_seq_len, or batches = [] to measure no "
                         "throughput)")
    path.write_text(path.read_text().replace("batches = [1]", "batches = []"))
    assert parse_spec(path.read_text(), source="spec.toml").bench.batches == ()


def test_a_local_run_refuses_more_threads_than_this_machine_can_take(write, cli_error, tmp_path):
    from depthwidth.machine import per_core_limit

    path = write("threads = 1", f"threads = {per_core_limit() + 1}")
    parse_spec(path.read_text(), source="spec.toml")  # valid anywhere: the bound of a stored spec is fixed
    line = cli_error(["study", "run", str(path), "--dir", str(tmp_path / "study")])
    assert f"execution.threads={per_core_limit() + 1} is above this machine's limit of {per_core_limit()} threads" \
        in line
    assert not (tmp_path / "study").exists()
    line = cli_error(["study", "run", str(write()), "--dir", str(tmp_path / "study"), "--workers", "100000"])
    assert f"workers=100000 is above this machine's limit of {per_core_limit()} worker processes" in line
    assert not (tmp_path / "study").exists()
