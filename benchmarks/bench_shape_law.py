"""Shape-aware law speed: one fit with a bootstrap, the model selection (every form on the same held-out
splits) and a prescription at 10x the data, on 48 synthetic configurations drawn from the Liu et al. 2026 form
(`tests/report/shape_law_data.py`); with --liu-csv, the same fit on the Chinchilla models Liu et al. fit
(their `Scaling/get_fitting_data_chinchilla.csv`, the 40 highest losses left out as they do), printed beside
the exponents they report.

Target: fit + selection + prescription within 30 s on one core (a report computes all three). Exit 1 when missed.

    python benchmarks/bench_shape_law.py [--bootstrap 200] [--splits 20] [--liu-csv PATH]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "report"))

from shape_law_data import LIU, draw  # noqa: E402

#: Liu et al. 2026, their fit of the Chinchilla models (depth counted as n_layers; their notebook fit-5)
LIU_PUBLISHED = {"a_w": 0.977, "a_l": 1.20, "a_D": 0.299, "E": 1.750}
TARGET_S = 30.0


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def liu_check(path: str) -> None:
    from depthwidth.report.fit_shape import LawPoint, fit_shape_law

    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    cut = sorted(float(r["loss"]) for r in rows)[-40]
    points = [LawPoint(width=float(r["d_model"]), depth=float(r["n_layers"]), tokens=float(r["num_tokens"]),
                       params=float(r["model_size"]), loss=float(r["loss"])) for r in rows if float(r["loss"]) < cut]
    fit, seconds = _timed(lambda: fit_shape_law(points, form="liu", n_bootstrap=100, level=0.95))
    print(f"Chinchilla models ({len(points)} points), liu form, {seconds:.1f} s with 100 resamples:")
    for name, published in LIU_PUBLISHED.items():
        iv = fit.intervals[name]
        print(f"  {name:4s} ours {iv.value:.3f} [{iv.lo:.3f}, {iv.hi:.3f}]   Liu et al. {published:.3f}")
    print(f"  in-sample relative error {100 * fit.in_sample_error:.2f}% (Liu et al.: 0.40%)")


def main() -> int:
    from depthwidth.report.fit_select import select_form
    from depthwidth.report.fit_shape import fit_shape_law
    from depthwidth.report.prescribe import Limits, Target, candidates, prescribe
    from depthwidth.shapes.shape import Shape

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--liu-csv", metavar="PATH", help="Liu et al.'s table of the Chinchilla models")
    args = ap.parse_args()
    points = draw(seed=0)
    fit, t_fit = _timed(lambda: fit_shape_law(points, form="liu", n_bootstrap=args.bootstrap, level=0.9))
    sel, t_sel = _timed(lambda: select_form(points, n_splits=args.splits))
    base = Shape(n_layers=2, d_model=64, n_heads=1, vocab_size=256, max_seq_len=256)
    target = Target(params=10 * 12 * 16 * 512**2, non_embedding=True, tokens=3e10, seq_len=256)
    pres, t_pres = _timed(lambda: prescribe(fit, members=candidates(base=base, target=target), target=target,
                                            limits=Limits()))
    print(f"fit (liu, {len(points)} points, {args.bootstrap} resamples): {t_fit:.2f} s; "
          + ", ".join(f"{k} {fit.params[k]:.3f} (true {LIU[k]})" for k in ("a_w", "a_l", "a_D")))
    print(f"model selection ({args.splits} splits x 3 forms): {t_sel:.2f} s; {sel.line}")
    print(f"prescription ({len(pres.candidates)} candidates): {t_pres:.2f} s; best {pres.best.label}")
    total = t_fit + t_sel + t_pres
    print(f"total {total:.1f} s (target <= {TARGET_S:g} s)")
    if args.liu_csv:
        liu_check(args.liu_csv)
    return 0 if total <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
