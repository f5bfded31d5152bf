"""results.csv runs nothing when a spreadsheet opens it: a text cell that starts like a formula (`=`, `+`,
`-`, `@`, tab, CR) and is not a number gets a leading single quote (OWASP's rule); numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pytest

from depthwidth.report.export import csv_cell

LABELS = ('=HYPERLINK("x")', "+1+1", "-2+3", "@SUM(A1)", "=cmd|' /C calc'!A0", "\t=1+1", "\r=1+1")


@pytest.mark.parametrize("text", [*LABELS, "-", "+", "=", "@", "-inf", "-1e", "--1"])
def test_a_text_that_starts_like_a_formula_gets_a_quote(text):
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-0.5, 1e-3, -3, 0, 2.8, float("-inf"), True, "-0.5", "1e-3", "-5", "+7",
                                   "-.5", "+1.5E+3", "N25K", "L2-H64-A4", "a=b", "x-y", "", "1-2"])
def test_numbers_and_plain_text_stay_as_they_are(value):
    assert csv_cell(value) == value


def test_none_is_an_empty_cell():
    assert csv_cell(None) == ""


def test_the_report_of_an_imported_table_quotes_its_formula_labels(tmp_path, capsys):
    from depthwidth.cli import main

    rows = [(label, 3.0 + i / 10, i) for i, label in enumerate((*LABELS[:4], "-5", "N25K"))]
    table = tmp_path / "runs.csv"
    with table.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["d_model", "n_layers", "tokens", "loss", "label", "seed"])
        writer.writerows([(64, 2, 100000, loss, label, seed) for label, loss, seed in rows])
    study = tmp_path / "study"
    assert main(["study", "import", str(table), "--dir", str(study), "--vocab", "256", "--head-dim", "16"]) == 0
    assert main(["report", str(study), "-o", str(tmp_path / "report"), "--bootstrap", "10"]) == 0
    capsys.readouterr()
    text = (tmp_path / "report" / "results.csv").read_text()
    got = {r["group"]: r for r in csv.DictReader(io.StringIO(text))}
    assert set(got) == {"'" + x for x in LABELS[:4]} | {"-5", "N25K"}
    for label, loss, seed in rows:
        row = got["'" + label if label in LABELS else label]
        assert float(row["val_loss"]) == pytest.approx(loss) and row["shape"] == "L2-H64-A4"
        assert row["n_layers"] == "2" and row["d_model"] == "64"
    # no cell of the file starts like a formula unless it is a number
    for record in csv.reader(io.StringIO(text)):
        for cell in record:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            assert not cell.startswith("-") or float(cell) < 0, cell
