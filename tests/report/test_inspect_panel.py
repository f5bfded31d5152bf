"""The "does a model use its depth?" panel: the fixture study with an inspection stored for each shape's
first seed (through the store's own API), read back into the per-shape results, drawn per budget group,
said in words (which blocks are fragile, whether the two ends are, the effective depth), and written into
the comparison table, results.csv/JSON and the HTML page."""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import replace

import pytest

from depthwidth.report.data import load_study
from depthwidth.report.inspect_panel import fragile_ends, inspect_verdict, plot_inspection
from depthwidth.report.study_tables import comparison
from depthwidth.study import Store, summarize

BROKEN = "L16-H48-A3"  # its last block costs nothing to skip: not the fragile-ends pattern


def synthetic(n_layers: int, label: str, loss: float) -> dict:
    """An inspection of `n_layers` blocks: the first block most fragile, the last next (unless BROKEN), the middle
    cheap; the logit lens falling to the model's loss; the greedy removal took a quarter of the blocks."""
    drop = [1.0 + 0.1 * n_layers] + [0.002 * (i + 1) for i in range(n_layers - 2)] + ([0.5] if n_layers > 1 else [])
    if label == BROKEN:
        drop[-1] = 0.0001
    removed = list(range(1, 1 + n_layers // 4))
    return {"source": "runs/x", "shape": label, "data": "validation of shakespeare", "n_layers": n_layers,
            "windows": 8, "tokens": 512, "loss": loss, "drop_increase": drop,
            "pair_increase": [d + 0.1 for d in drop[:-1]], "block_influence": [0.1] * n_layers,
            "angular_distance": {"1": [0.2] * n_layers}, "lens_loss": [loss + 2.0 * (1 - (i + 1) / n_layers)
                                                                       for i in range(n_layers)],
            "lens_kl": [1.0 - (i + 1) / n_layers for i in range(n_layers)], "attn_ratio": [0.3] * n_layers,
            "mlp_ratio": [0.4] * n_layers, "tolerance": 0.01, "effective_depth": n_layers - len(removed),
            "removed": removed, "removed_increase": [0.001 * (k + 1) for k in range(len(removed))]}


@pytest.fixture(scope="module")
def inspected(fixture_study, tmp_path_factory):
    source, _ = fixture_study
    folder = tmp_path_factory.mktemp("inspected") / "study"
    shutil.copytree(source, folder)
    with Store.open(folder) as store:
        for row in summarize(store).rows:
            if row.seed_losses:
                store.record_inspection(row.best_run_ids[0], settings={"windows": 8, "tolerance": 0.01},
                                        status="completed", result=synthetic(row.n_layers, row.shape_label,
                                                                             row.seed_losses[0]),
                                        error=None, wall_seconds=0.5)
    return folder


@pytest.fixture(scope="module")
def drawn(inspected, tmp_path_factory):
    """The study read back, and its panel drawn once."""
    data = load_study(inspected)
    return data, plot_inspection(data, tmp_path_factory.mktemp("figures"))


def test_each_shape_carries_its_inspection(inspected):
    data = load_study(inspected)
    rows = {r.key: r for r in data.results}
    deep = rows["P100k/L8-H32-A2"]
    assert deep.effective_depth == 6 and deep.inspect_tolerance == 0.01
    assert deep.most_important_block == 0 and deep.least_important_block == 1
    assert deep.inspect_loss == pytest.approx(deep.seed_losses[0]) and deep.inspection["n_layers"] == 8
    assert deep.inspection["run_id"] == deep.best_run_ids[0]
    assert rows[f"P400k/{BROKEN}"].least_important_block == 15
    assert fragile_ends([1.0, 0.1, 0.5]) is True and fragile_ends([1.0, 0.6, 0.5]) is False
    assert fragile_ends([1.0, 0.5]) is None


def test_the_panel_says_which_blocks_are_fragile(drawn):
    data, fig = drawn
    words = inspect_verdict(data)
    assert "The two ends are the most fragile blocks (Lad et al.'s pattern) (P100k) in 2 of 2 shapes with 3 or more " \
           "blocks (L4-H48-A3, L8-H32-A2); the first block is the most fragile in 2 of them." in words
    assert any(w.startswith("The two ends are the most fragile blocks (Lad et al.'s pattern) (P400k) in 2 of 3 shapes")
               for w in words)
    p100k = next(w for w in words if w.startswith("Within 0.01 nats (P100k): "))
    assert "L8-H32-A2: effective depth 6 of 8, most fragile the first (+1.800 nats), least block 1 (at 0.25 of the " \
           "depth) (+0.002), logit lens +1.00 nats from the final loss at 0.50 of the depth" in p100k
    assert "L1-H96-A6: effective depth 1 of 1, logit lens +0.00 nats" in p100k
    assert fig is not None and fig.name == "inspect" and fig.png.read_bytes()[:4] == b"\x89PNG"
    assert fig.svg.is_file() and words[0] in fig.caption


def test_the_table_csv_json_and_page_hold_it(drawn, written_report):
    from depthwidth.report.export import render_csv
    from depthwidth.report.html import render_html

    base, _ = written_report  # the fixture study's report, with this study's results and table in it
    data, fig = drawn
    table = comparison(data, targets=base.targets, hardware=base.table.hardware)
    keys = [c.key for c in table.columns]
    assert {"effective_depth", "inspect_tolerance", "most_important_block", "least_important_block"} <= set(keys)
    row = next(r for r in table.rows if r["shape"] == "L8-H32-A2" and r["group"] == "P100k")
    assert (row["effective_depth"], row["most_important_block"], row["least_important_block"]) == (6, 0, 1)
    report = replace(base, study=data, table=table)
    rows = list(csv.DictReader(io.StringIO(render_csv(report))))
    assert sorted({int(r["effective_depth"]) for r in rows}) == [1, 2, 3, 6, 12]
    deep = next(r for r in rows if r["shape"] == "L8-H32-A2" and r["group"] == "P100k")
    assert (deep["most_important_block"], deep["least_important_block"], deep["inspect_tolerance"]) == ("0", "1",
                                                                                                          "0.01")
    page = render_html(report, [fig])
    assert 'id="fig-inspect"' in page and "Lad et al.&#x27;s pattern" in page and ">effective depth<" in page
    shape = next(r for r in report.to_dict()["study"]["results"]
                 if r["shape_label"] == "L8-H32-A2" and r["group"] == "P100k")
    assert shape["effective_depth"] == 6 and len(json.loads(json.dumps(shape))["inspection"]["drop_increase"]) == 8


def test_a_study_without_inspections_has_no_panel_and_no_columns(fixture_study, tmp_path):
    folder, _ = fixture_study
    data = load_study(folder)
    assert plot_inspection(data, tmp_path) is None and inspect_verdict(data) == []
    assert "effective_depth" not in [c.key for c in comparison(data, targets={}, hardware="cpu").columns]
