"""Every size a flag sets has a bound with its reason: `bench --batches 1000000000`, `check coord --widths
64,131072`, `check transfer --lrs 100000` (100,000 trainings) or `--depths 2,16384` are refused in one line
(exit 2, no traceback) before anything is allocated or trained, within a few seconds and bounded memory;
threads are bounded by this machine's cores."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from depthwidth.machine import per_core_limit

TEXT = "the quick brown fox jumps over the lazy dog; seven wizards quietly hex bad jugglers.\n" * 80
BENCH = ["bench", "--layers", "1", "--width", "16", "--heads", "2", "--vocab", "64", "--max-seq-len", "32",
         "--prompt-lens", "4", "--contexts", "4", "--repeat", "1", "--warmup", "0", "--hardware", "cpu"]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "input.txt"
    path.write_text(TEXT)
    return path


@pytest.fixture
def refused(cli_error):
    """refused(argv) -> its one line, asserting exit 2 within 5 s and 256 MiB of Python allocations."""

    def run(argv: list[str]) -> str:
        tracemalloc.start()
        start = time.perf_counter()
        try:
            line = cli_error([str(a) for a in argv])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert time.perf_counter() - start < 5, line
        assert peak < 256 * 2**20, (peak, line)
        return line

    return run


def test_bench_batches_of_a_billion(refused):
    assert refused([*BENCH, "--batches", "1000000000"]) == (
        "depthwidth bench: error: batches=1000000000 is above the limit of 65,536 (16x the largest serving "
        "batches, which hold a few thousand sequences)")


@pytest.mark.parametrize("flags,message", [
    (["--batches", ",".join(map(str, range(1, 100)))], "batches has 99 values, above the limit of 64"),
    (["--repeat", "1000000000"], "repeat=1000000000 is above the limit of 10,000"),
    (["--threads", "4097"], "threads=4097 is above the limit of 4,096 (more threads than any machine has cores)"),
    (["--seed", "99999999999999999999"], "seed=~10^20 must be below 2**63"),
])
def test_bench_sizes_are_bounded(refused, flags, message):
    assert message in refused([*BENCH, *flags])


def test_bench_threads_are_bounded_by_this_machines_cores(refused):
    n = per_core_limit() + 1
    assert refused([*BENCH, "--threads", n]).startswith(
        f"depthwidth bench: error: threads={n} is above this machine's limit of {per_core_limit()} threads")


def test_a_benchmark_that_cannot_fit_is_refused_before_it_allocates(refused):
    line = refused(["bench", "--layers", "4", "--width", "256", "--heads", "4", "--vocab", "64", "--max-seq-len",
                    "65536", "--prompt-lens", "4", "--contexts", "4", "--batches", "65536", "--new-tokens", "60000",
                    "--repeat", "1", "--warmup", "0", "--hardware", "cpu"])
    assert "the largest point of the benchmark of L4-H256-A4 (KV cache, token ids, logits) needs at least" in line


def test_check_coord_width_131072(refused, text_file):
    assert refused(["check", "coord", "--widths", "64,131072", "--corpus", text_file]) == (
        "depthwidth check: error: --widths: 131072 is above the limit of 8,192 (32x the default widest, 256: a "
        "check compares small models)")


def test_check_transfer_lrs_100000(refused, text_file):
    assert refused(["check", "transfer", "--lrs", "100000", "--corpus", text_file]) == (
        "depthwidth check: error: --lrs: 100,000 values, above the limit of 64 (sizes or learning rates per list; "
        "a check's defaults have 3 to 8)")


def test_check_transfer_depth_16384(refused, text_file):
    assert refused(["check", "transfer", "--depths", "2,16384", "--lrs", "2", "--steps", "2",
                    "--corpus", text_file]) == (
        "depthwidth check: error: --depths: 16384 is above the limit of 1,024 (32x the default deepest, 32: a "
        "check compares small models)")


def test_check_transfer_states_and_bounds_its_trainings(refused, text_file):
    widths = ",".join(str(16 * k) for k in range(1, 41))
    assert refused(["check", "transfer", "--widths", widths, "--lrs", "64", "--corpus", text_file]) == (
        "depthwidth check: error: the sweep trains 5,504 models (2 parametrization(s) x 43 shapes x 64 learning "
        "rates), above the limit of 2,048 (trainings of one transfer sweep, 20x its default of 96); use fewer "
        "--lrs, --widths or --depths")


@pytest.mark.parametrize("argv,message", [
    (["check", "transfer", "--lr-max", "1e300"], "--lr-max 1e+300 is above the limit of 10 (about 100x the largest"),
    (["check", "coord", "--lr", "1e300"], "lr=1e+300 is above the limit of 10"),
    (["check", "coord", "--steps", "1000000000"], "--steps 1000000000 is above the limit of 100,000"),
    (["check", "coord", "--widths", ",".join(str(16 * k) for k in range(1, 70))], "--widths: 69 values, above the "
                                                                                  "limit of 64"),
    (["check", "coord", "--widths", "64,8192"], "training L32-H8192-A512 (fp32 weights, gradients and two AdamW "
                                                "moments) needs at least"),
])
def test_check_sizes_and_learning_rates_are_bounded(refused, text_file, argv, message):
    assert message in refused([*argv, "--corpus", text_file])


def test_check_threads_are_bounded_by_this_machines_cores(refused, text_file):
    n = per_core_limit() + 1
    assert f"--threads={n} is above this machine's limit of {per_core_limit()} threads" in refused(
        ["check", "coord", "--threads", n, "--corpus", text_file])


@pytest.mark.parametrize("flags,message", [
    (["--lr", "1e300"], "lr=1e+300 is above the limit of 10"),
    (["--threads", str(per_core_limit() + 1)], "is above this machine's limit of"),
])
def test_train_learning_rate_and_threads_are_bounded(refused, text_file, tmp_path, flags, message):
    line = refused(["train", "--shape", "L1-H8-A1", "--steps", "2", "--seq-len", "8", "--batch-size", "2",
                    "--data", text_file, "--out", tmp_path / "run", *flags])
    assert message in line and not (tmp_path / "run").exists()
