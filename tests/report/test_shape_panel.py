"""The report's shape-aware panel and `recommend --target-params`, on the fixture study (loss = 1.6 +
40/N^0.3 + 0.04 log2(d/L / 16)^2: a basin with its floor at d/L = 16) and on an imported table."""

import json
from pathlib import Path

from depthwidth.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imported-runs.csv"


def test_the_report_shows_the_law_and_the_prescription(written_report):
    report, files = written_report
    law = report.shape_law
    assert law.n_points == 16 and law.selection.best == "aspect"  # the fixture's penalty is in the aspect ratio
    assert law.fit.form == "aspect" and 11 < law.fit.params["r0"] < 23  # the floor at d/L 16
    pres = law.prescription
    assert pres.target.params == 10 * max(r.params for r in report.study.results)
    assert 8 < pres.best.shape.aspect_ratio < 32 and pres.extrapolation["params"] > 9
    page = files.html.read_text()
    assert '<h2 id="shape-law">Shape-aware law and prescription</h2>' in page
    assert "Model selection: held-out error (mean |L_hat - L| / L over 10 random 80%/20% splits" in page
    assert 'id="prescription">At ' in page and "This is an extrapolation beyond the measured range" in page
    assert "Imported runs" not in page
    assert "shape_law" in [f.name for f in files.figures] and (files.folder / "shape_law.png").stat().st_size > 10_000
    data = json.loads(files.json.read_text())
    assert data["shape_law"]["prescription"]["best"]["shape"]["d_model"] == pres.best.shape.d_model


def test_an_imported_study_says_so_and_gets_the_panel(tmp_path):
    from depthwidth.report.build import report_for
    from depthwidth.report.html import render_html

    cols = "d_model=hidden_size,n_layers=num_layers,n_heads=num_heads,vocab=vocab_size,loss=val_loss"
    args = ["study", "import", str(EXAMPLE), "--dir", str(tmp_path / "s"), "--columns", cols, "--seq-len", "64"]
    assert main([*args[:4], str(tmp_path / "gated"), *args[5:]]) == 0
    gated = report_for(tmp_path / "gated", n_bootstrap=10).shape_law  # the CPU ladder's runs are below 4 per param
    assert gated.n_points == 0 and gated.fit is None
    assert "fewer than 4 tokens per non-embedding parameter" in gated.skipped
    assert main([*args, "--min-tokens-per-param", "0.1"]) == 0
    report = report_for(tmp_path / "s", n_bootstrap=10)
    assert report.shape_law.imported["rows"] == 18 and report.shape_law.n_points == 18
    page = render_html(report, [])
    assert "<b>Imported runs:</b> These 18 runs were imported from imported-runs.csv" in page
    assert ("the fairness of their protocol (data, data order, token budgets, learning-rate tuning, seeds) cannot "
            "be") in page
    assert "<dt>fair comparison</dt><dd>cannot be checked (imported runs)</dd>" in page
    assert 'id="model-selection">Model selection: held-out error' in page and 'id="prescription">' in page


def test_recommend_target_params_prints_the_prescription(fixture_study, capsys):
    folder, _ = fixture_study
    args = ["recommend", str(folder), "--target-params", "50M", "--target-tokens", "1B", "--hardware", "h100",
            "--bootstrap", "20", "--splits", "5"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "model selection: held-out error" in text and "fit (aspect): L = (E + A/N^alpha" in text
    assert "At 50M parameters and 1B tokens the aspect fit puts the lowest loss at" in text
    assert "(the flat basin)" in text and "This is an extrapolation beyond the measured range" in text
    assert main([*args, "--json", "--max-decode-ms", "0.3"]) == 0
    law = json.loads(capsys.readouterr().out)
    pres = law["prescription"]
    assert pres["target"]["params"] == 50e6 and pres["limits"]["max_decode_ms"] == 0.3
    chosen = pres["chosen"]
    assert chosen["decode_ms"] <= 0.3 and chosen["feasible"]
    assert chosen["in_basin"] or "No basin shape meets the limits; the best that does is" in pres["verdict"]
    assert law["fit"]["form"] == "aspect" and law["selection"]["best"] == "aspect"


def test_recommend_target_params_refuses_in_one_line(fixture_study, capsys):
    folder, _ = fixture_study
    assert main(["recommend", str(folder), "--target-tokens", "1B"]) == 2
    assert "give --target-params with them" in capsys.readouterr().err
    assert main(["recommend", str(folder), "--target-params", "50M", "--hardware", "study"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a shape at the target scale was never measured on the study's machine" in err[0]
    assert main(["recommend", str(folder), "--target-params", "1k", "--bootstrap", "0", "--splits", "2"]) == 2
    assert "no prescription for" in capsys.readouterr().err
