"""The fuzz suite's harness: every generated input goes through `depthwidth.cli.main` in this process,
bounded in time and memory, and must end in exit 0 (an input that happens to be valid; or exit 1 where a
command reports an outcome that way, such as `recommend` finding nothing within the limits, never with
a traceback) or exit 2 with exactly one line on stderr and no traceback.

- Bounds: a watchdog thread interrupts an input that runs longer than `TIME_LIMIT_S` or grows the
  process's resident memory by more than `MEMORY_LIMIT_BYTES`; the address space is capped a few GiB
  above its size at the start of each input, so an allocation of tens of GiB fails at once instead of
  taking the machine down (and shows up as a failure, not as a kill).
- Valid inputs are not executed to the end: what would train, time, measure, export or render is
  replaced by a stand-in raising `Accepted` after every check of the input has run (`stand_ins`).
- Profiles: the default is short and deterministic (`make test`); `-m slow` runs the long, random one.
  The counts of every category (inputs, clean errors, accepted, failures) are printed at the end.
"""

from __future__ import annotations

import _thread
import contextlib
import hashlib
import io
import json
import os
import resource
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass

import psutil
import pytest
import torch
from hypothesis import HealthCheck, given, settings

TIME_LIMIT_S = 30.0
MEMORY_LIMIT_BYTES = 1024**3
ADDRESS_SPACE_HEADROOM = 6 * 1024**3
#: inputs per fuzz test in the short (default) and the long (slow) profile
PROFILES = {"short": 40, "long": 1000}
TALLY: dict[str, Counter] = {}


class Accepted(BaseException):
    """Raised by a stand-in: the input passed every check and would now run for real."""


@dataclass(frozen=True, slots=True)
class Result:
    code: int
    stdout: str
    stderr: str
    seconds: float
    rss_growth: int


def pytest_generate_tests(metafunc):
    """Every fuzz test taking `profile` runs once per profile; the long one is marked slow."""
    if "profile" in metafunc.fixturenames:
        metafunc.parametrize("profile", [pytest.param(name, marks=[pytest.mark.slow] if name == "long" else [])
                                         for name in PROFILES])


def fuzz(strategy, check, *, profile: str, scale: float = 1.0) -> None:
    """Run `check(value)` on values drawn from `strategy`: `scale` x the profile's count, the short profile
    deterministic (the same inputs every run), the long one random. Hypothesis shrinks a failure."""

    @settings(max_examples=max(1, round(PROFILES[profile] * scale)), deadline=None, database=None,
              derandomize=profile == "short", print_blob=True, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(value):
        check(value)

    run()


class _Watchdog:
    """Interrupts the main thread when an input runs too long or grows the resident memory too much."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.start_rss = self.peak_rss = self.process.memory_info().rss
        self.reason: str | None = None
        self._done = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(0.01):
            rss = self.process.memory_info().rss
            self.peak_rss = max(self.peak_rss, rss)
            if rss - self.start_rss > MEMORY_LIMIT_BYTES:
                self.reason = f"resident memory grew by {(rss - self.start_rss) / 2**20:.0f} MiB"
            elif time.monotonic() - self._start > TIME_LIMIT_S:
                self.reason = f"still running after {TIME_LIMIT_S:g} s"
            if self.reason:
                _thread.interrupt_main()
                return

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


@contextlib.contextmanager
def _address_space_cap():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_cli(argv: list[str]) -> Result:
    """`depthwidth ARGV` in this process, within the bounds; an `Accepted` stand-in counts as exit 0."""
    from depthwidth import cli

    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with _Watchdog() as dog, _address_space_cap(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _warnings_as_printed() as shown:
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # usage errors: argparse exits with 2
            code = exc.code if isinstance(exc.code, int) else 1
        except Accepted:
            code = 0
        except KeyboardInterrupt:
            code = 130
    seconds = time.monotonic() - start
    if dog.reason:
        raise AssertionError(f"depthwidth {' '.join(argv)}: {dog.reason}")
    printed = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in shown)
    return Result(code=code, stdout=out.getvalue(), stderr=printed + err.getvalue(), seconds=seconds,
                  rss_growth=dog.peak_rss - dog.start_rss)


@contextlib.contextmanager
def _warnings_as_printed():
    """The warnings a user of the command line would see on stderr (Python's default filters; pytest's
    own capture would hide them), recorded."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
        yield shown


def check_clean(category: str, argv: list[str], result: Result | None = None) -> Result:
    """Run (unless given) and assert the promise; count the outcome under `category`."""
    result = result or run_cli(argv)
    tally = TALLY.setdefault(category, Counter())
    tally["inputs"] += 1
    lines = result.stderr.splitlines()
    clean = result.code == 2 and len(lines) == 1 and lines[0].startswith("depthwidth") and "Traceback" not in \
        result.stderr
    # exit 1 is also an outcome some commands report (nothing meets the limits, a run diverged), never a bug's
    outcome = result.code == 0 or (result.code == 1 and "Traceback" not in result.stderr
                                   and "internal error" not in result.stderr)
    if not (clean or outcome):
        tally["failures"] += 1
        raise AssertionError(f"depthwidth {' '.join(map(repr, argv))}: exit {result.code}, stderr:\n{result.stderr}")
    tally["clean errors" if clean else "accepted"] += 1
    return result


def snapshot(folder) -> dict[str, str]:
    """sha256 of every file under `folder`: the study's data. Left out are SQLite's transient -wal/-shm
    files and study.lock, which holds the pid of the last process that took the lock."""
    from pathlib import Path

    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm")) and p.name != "study.lock"}


def pytest_terminal_summary(terminalreporter):
    if not TALLY:
        return
    terminalreporter.section("fuzz")
    total = Counter()
    for category, counts in sorted(TALLY.items()):
        total.update(counts)
        terminalreporter.write_line(f"{category:>10}: " + ", ".join(f"{counts[k]} {k}" for k in
                                                                ("inputs", "clean errors", "accepted", "failures")))
    terminalreporter.write_line(f"{'all':>10}: " + ", ".join(f"{total[k]} {k}" for k in
                                                           ("inputs", "clean errors", "accepted", "failures")))
    if os.environ.get("DEPTHWIDTH_FUZZ_REPORT"):
        with open(os.environ["DEPTHWIDTH_FUZZ_REPORT"], "w") as fh:
            json.dump({k: dict(v) for k, v in TALLY.items()}, fh, indent=1)


# ---- stand-ins for what would run for real ------------------------------------------------------
def _accept(*args, **kwargs):
    raise Accepted


def _bench_after_loading(target, config, **kwargs):
    from depthwidth.bench.target import load_target

    load_target(target)  # the checkpoint or shape checks, and the model built, as the benchmark would
    raise Accepted


def _explore_bound(explorer, **address):
    """`depthwidth explore` binds its address (a bad host or a port in use fails as it would) and stops there."""
    from depthwidth.explore.server import make_server

    make_server(explorer, **address).server_close()
    raise Accepted


STAND_INS = (
    ("depthwidth.train", "train", _accept),
    ("depthwidth.train.capacity", "capacity_curve", _accept),
    ("depthwidth.train.coord", "coord_check", _accept),
    ("depthwidth.train.transfer", "transfer_sweep", _accept),
    ("depthwidth.bench.serving", "bench", _bench_after_loading),
    ("depthwidth.machine", "measure_profile", _accept),
    ("depthwidth.report.build", "build_report", _accept),
    ("depthwidth.hf.export", "export_run", _accept),
    ("depthwidth.report.model_export", "export_study", _accept),
    ("depthwidth.explore", "make_server", _explore_bound),
)


@pytest.fixture(scope="module")
def stand_ins():
    import importlib

    modules = {}
    for module, _, _ in STAND_INS:  # import every module first: one imported while another is patched
        try:                        # would keep the stand-in it imported by name, after the undo
            modules[module] = importlib.import_module(module)
        except ImportError:  # an optional part that is not there
            continue
    patch = pytest.MonkeyPatch()
    for module, name, fake in STAND_INS:
        if module in modules and hasattr(modules[module], name):
            patch.setattr(modules[module], name, fake)
    yield
    patch.undo()


@pytest.fixture(scope="module")
def driver_stand_in():
    """`study run` goes as far as its driver (lock, store opened or created, runs synced) and stops there."""
    from depthwidth.study import runner

    patch = pytest.MonkeyPatch()
    patch.setattr(runner._Driver, "run", _accept)
    yield
    patch.undo()


@pytest.fixture(scope="module")
def executor_stand_in():
    """`study run` and `demo` stop once the spec is expanded, before the study folder is touched."""
    from depthwidth.study import runner

    patch = pytest.MonkeyPatch()
    patch.setattr(runner, "make_executor", _accept)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def fuzz_env(tmp_path_factory):
    """A cache folder holding this machine's profile (so nothing measures the machine), a short Ray
    timeout and a working folder of its own, for the whole fuzz session (hypothesis runs many inputs per
    test)."""
    from depthwidth.machine import EAGER_BLOCK_OP, HardwareProfile, device_name, profile_path, save_profile

    patch = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("fuzz-cache")
    patch.chdir(tmp_path_factory.mktemp("fuzz-cwd"))  # where an empty or relative generated path points
    patch.setenv("DEPTHWIDTH_CACHE", str(cache))
    patch.setenv("DEPTHWIDTH_RAY_TIMEOUT", "2")
    prof = HardwareProfile(device="cpu", device_name=device_name("cpu"), threads=torch.get_num_threads(), gemm=(),
                           peak_flops={"fp32": 1e11, "bf16": 2e11}, copy_bandwidth=2e10, op_overhead_s=4e-6,
                           op_overheads={EAGER_BLOCK_OP: 4e-6}, mem_capacity=8e9, torch_version=torch.__version__,
                           created="2026-01-01T00:00:00+00:00", quick=False)
    save_profile(prof, profile_path(threads=torch.get_num_threads()))
    yield cache
    patch.undo()


@pytest.fixture(scope="session")
def harness():
    """The harness's functions for the test modules (test folders are not packages)."""
    import types

    return types.SimpleNamespace(run=run_cli, check=check_clean, fuzz=fuzz, snapshot=snapshot, Accepted=Accepted)


@pytest.fixture(scope="session")
def fuzz_paths(tmp_path_factory, fuzz_env):
    """Named paths the generated command lines use: valid files and folders, and hostile ones."""
    from depthwidth.study import run_study

    root = tmp_path_factory.mktemp("fuzz-paths")
    text = root / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 400)
    (root / "empty.txt").write_bytes(b"")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 16)
    (root / "folder").mkdir()
    (root / "empty_dir").mkdir()
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
                                                  "num_attention_heads": 4, "intermediate_size": 128,
                                                  "vocab_size": 256}))
    spec = root / "spec.toml"
    spec.write_text(f'name = "fz"\nhardware = "cpu"\n[data]\ncorpus = "{text}"\nseq_len = 16\nbatch_size = 4\n'
                    '[train]\nsteps = 2\n[eval]\nevery = 1\nwindows = 2\n[lr]\ngrid = [1e-3]\n'
                    '[bench]\nenabled = false\n'
                    '[[shape]]\nn_layers = 1\nd_model = 16\nn_heads = 2\n')
    run_study(spec, study_dir=root / "study")  # a real tiny study, before the stand-ins are in place
    return {"text": str(text), "empty": str(root / "empty.txt"), "binary": str(root / "binary.bin"),
            "folder": str(root / "folder"), "empty_dir": str(root / "empty_dir"), "config": str(root / "config.json"),
            "spec": str(spec), "study": str(root / "study"), "missing": str(root / "missing"),
            "below_file": f"{text}/sub", "devnull": "/dev/null", "devzero": "/dev/zero",
            "profile_json": str(root / "missing.json")}
