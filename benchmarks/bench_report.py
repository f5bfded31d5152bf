"""Report speed: the scaling-law fitter with BLAS held to one thread against BLAS left as it is (side by
side, alternating, same data), then the whole report of a synthetic study (load, compute with a
200-resample bootstrap, draw and write every file).

L-BFGS-B calls BLAS on vectors of 3-5 numbers; a multi-threaded OpenBLAS then spends most of its time
handing work between threads, badly so on a busy machine. `report.fit` holds BLAS to one thread
(threadpoolctl) around its optimisation; this prints how much that buys here.

Target: the limited fitter is not slower than the unlimited one (ratio >= 1.0). Exit status 1 when missed.

    python benchmarks/bench_report.py [--rounds 3] [--bootstrap 100]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "report"))

from depthwidth.report import fit as fit_module  # noqa: E402


def _data():
    rng = np.random.default_rng(0)
    n = np.repeat(np.geomspace(1e5, 1e8, 6), 2)
    return n, (1.8 + 60.0 / n**0.35) * np.exp(rng.normal(0.0, 0.005, n.size))


def _time_fit(*, limited: bool, bootstrap: int) -> float:
    n, loss = _data()
    original = fit_module._one_blas_thread
    if not limited:
        fit_module._one_blas_thread = contextlib.nullcontext
    try:
        start = time.perf_counter()
        fit_module.fit_power_law(n=n, loss=loss, n_bootstrap=bootstrap, seed=0)
        return time.perf_counter() - start
    finally:
        fit_module._one_blas_thread = original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", type=int, default=100)
    args = parser.parse_args()

    limited, unlimited = [], []
    for i in range(args.rounds):  # alternate, so that other load hits both alike
        order = (True, False) if i % 2 == 0 else (False, True)
        for flag in order:
            (limited if flag else unlimited).append(_time_fit(limited=flag, bootstrap=args.bootstrap))
    lim, unl = statistics.median(limited), statistics.median(unlimited)
    print(f"fit_power_law, 12 points, {args.bootstrap} bootstrap refits, median of {args.rounds} rounds")
    print(f"  BLAS one thread : {lim:8.3f} s")
    print(f"  BLAS as loaded  : {unl:8.3f} s")
    print(f"  speed-up        : {unl / lim:8.2f} x")

    from fixture_study import build_fixture_study

    from depthwidth.report.build import build_report
    from depthwidth.report.data import load_study
    from depthwidth.report.export import write_report

    with tempfile.TemporaryDirectory() as tmp:
        build_fixture_study(Path(tmp) / "study")
        t0 = time.perf_counter()
        study = load_study(Path(tmp) / "study")
        t1 = time.perf_counter()
        report = build_report(study, n_bootstrap=200)
        t2 = time.perf_counter()
        files = write_report(report, Path(tmp) / "report")
        t3 = time.perf_counter()
    print(f"report of a synthetic study ({len(study.results)} shapes, {len(study.runs)} runs, "
          f"{len(files.figures)} plots)")
    print(f"  load {t1 - t0:.2f} s, compute {t2 - t1:.2f} s (bootstrap 200), draw and write {t3 - t2:.2f} s")
    ok = unl / lim >= 1.0
    print("target met" if ok else "target missed: limiting BLAS threads made the fitter slower")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
