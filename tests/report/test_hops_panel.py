"""The probe panel for a dense-target probe: token error against depth with seed bars, and the words that say
which shapes it favours (the fixture study with hop-k results written into it)."""

from dataclasses import replace

import pytest

from depthwidth.report.data import load_study
from depthwidth.report.probe_plots import plot_probes, probe_verdict, seed_values, token_error
from depthwidth.report.study_tables import comparison

# token error by k and seed: depth solves more hops (L2 only k=0, L4 up to k=1, L8 up to k=2)
ERRORS = {2: {"0": 0.01, "1": 0.30, "2": 0.50}, 4: {"0": 0.0, "1": 0.02, "2": 0.40},
          8: {"0": 0.0, "1": 0.0, "2": 0.03}, 16: {"0": 0.0, "1": 0.0, "2": 0.01}}


def hops_accuracy(n_layers: int, seed: int) -> dict[str, float]:
    return {k: 1.0 - min(1.0, e + 0.02 * seed * (k == "2")) for k, e in ERRORS.get(n_layers, ERRORS[2]).items()}


@pytest.fixture
def study(fixture_study):
    folder, _ = fixture_study
    data = load_study(folder)
    layers = {(r.group, r.shape_label): r.n_layers for r in data.results}
    runs = tuple(replace(run, probe_accuracy={"hops": hops_accuracy(layers[(run.group, run.label)], run.seed or 0)})
                 if run.kind == "train" and run.status == "completed" else run for run in data.runs)
    results = tuple(replace(r, probe_accuracy={"hops": {k: sum(hops_accuracy(r.n_layers, s)[k] for s in (0, 1)) / 2
                                                        for k in ERRORS[2]}}) for r in data.results)
    return replace(data, runs=runs, results=results)


def test_runs_carry_their_own_probe_results_and_slice_losses(fixture_study):
    folder, _ = fixture_study
    data = load_study(folder)
    row = next(r for r in data.results if r.key == "P400k/L4-H96-A6")
    per_seed = seed_values(data, row, lambda run: run.probe_accuracy["multihop"]["2"])
    assert sorted(per_seed) == pytest.approx([0.2, 0.21])  # 0.05 * L4 + 0.01 * seed, seeds 0 and 1
    assert seed_values(data, row, lambda run: run.slice_losses["python-docs"]) == pytest.approx(
        [row.slice_losses["python-docs"]] * 2, abs=0.05)


def test_panel_draws_token_error_by_depth_and_says_what_depth_buys(study, tmp_path):
    row = next(r for r in study.results if r.key == "P400k/L4-H96-A6")
    assert token_error(row, "hops", "2") == pytest.approx(0.41)
    errors = seed_values(study, row, lambda run: token_error(run, "hops", "2"))
    assert sorted(errors) == pytest.approx([0.40, 0.42])
    figure = plot_probes(study, tmp_path)
    assert figure.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    words = probe_verdict(study)
    p400 = [w for w in words if "(P400k)" in w]
    by_k = next(w for w in p400 if w.startswith("hops (P400k), token error by k"))
    assert "k=2 0.020 (L16-H48-A3) vs 0.510 (L2-H128-A8), deeper is better" in by_k, by_k
    assert "k=0 0.000 (L4-H96-A6) vs 0.010 (L2-H128-A8), alike" in by_k
    assert "Where the seeds separate, hops (P400k) favours the deeper shapes at k=1, 2." in p400
    solved = next(w for w in p400 if w.startswith("Hop counts solved"))
    assert "L2-H128-A8 k=0 [k=0]" in solved and "L4-H96-A6 k=0-1 [k=0-1]" in solved
    assert "L16-H48-A3 k=0-2 [k=0-2]" in solved
    assert any(w.startswith("Natural text shakespeare (P400k): lowest loss") for w in p400)
    assert " ".join(words) in figure.caption


def test_table_shows_token_error_for_the_dense_probe(study):
    table = comparison(study, targets={}, hardware="cpu")
    col = next(c for c in table.columns if c.key == "probe:hops:2")
    assert col.title == "hops k=2 err" and "token error" in col.note
    row = next(r for r in table.rows if r["shape"] == "L4-H96-A6" and r["group"] == "P400k")
    assert row["probe:hops:2"] == pytest.approx(0.41)


def test_overlapping_seeds_are_no_verdict(study):
    # make the seeds of every shape span everything at k=2: no shape is clearly better there
    wide = {0: 0.0, 1: 0.9}
    runs = tuple(replace(run, probe_accuracy={"hops": {**run.probe_accuracy["hops"], "2": 1.0 - wide[run.seed or 0]}})
                 if run.probe_accuracy else run for run in study.runs)
    by_k = next(w for w in probe_verdict(replace(study, runs=runs)) if w.startswith("hops (P400k), token error by k"))
    assert "k=2 0.020 (L16-H48-A3) vs 0.510 (L2-H128-A8), seeds overlap" in by_k
