"""`study import`: a table of runs trained elsewhere becomes a study folder the report reads; a malformed
table is one line naming its row and column, and nothing is written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.study.imported import import_runs, imported_info
from depthwidth.study.importer import Conventions, parse_columns

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "imported-runs.csv"
COLUMNS = "d_model=hidden_size,n_layers=num_layers,n_heads=num_heads,vocab=vocab_size,loss=val_loss"
GOOD = "d_model,n_layers,tokens,loss,seed\n64,2,100000,3.1,0\n32,8,100000,3.2,0\n128,4,200000,2.8,1\n"


def _table(tmp_path: Path, text: str, name: str = "runs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_table_imports_and_reads_back_as_a_study(tmp_path):
    from depthwidth.report.data import load_study
    from depthwidth.report.prescribe import law_points

    out = tmp_path / "ex"
    report = import_runs(EXAMPLE, out, columns=parse_columns(COLUMNS), conventions=Conventions(seq_len=64))
    assert report.runs == 18 and report.shapes == 9 and report.ignored_columns == ("model",)
    assert report.groups == ("N25K", "N25K@0.5", "N100K", "N100K@0.5", "N400K", "N400K@0.5")
    study = load_study(out)
    rows = list(csv.DictReader(EXAMPLE.open()))
    by_key = {(r["label"], f"L{r['num_layers']}-H{r['hidden_size']}-A{r['num_heads']}"): float(r["val_loss"])
              for r in rows}
    assert {(r.group, r.shape_label): r.val_loss for r in study.results} == by_key
    r = next(r for r in study.results if r.key == "N400K/L5-H80-A10")
    assert r.tokens == 204800 and r.params == 410480 and r.best_lr == pytest.approx(0.0032)
    assert r.tokens_per_s == 1392.0 and r.shape.vocab_size == 256 and r.shape.max_seq_len == 64
    points = law_points(study.results)
    assert len(points) == 18 and sorted({p.tokens for p in points}) == [102400, 204800]
    info = imported_info(out)
    assert info["table"] == "imported-runs.csv" and info["rows"] == 18 and len(info["sha256"]) == 64
    assert info["sources"] == ["depthwidth-0.1.0 ladder cpu fp32 (docs/imported-runs.md)"]
    assert "trained elsewhere" in study.description and study.protocol.corpus == "imported"


def test_json_lines_and_a_decode_column_measured_on_a_gpu(tmp_path):
    from depthwidth.report.data import load_study
    from depthwidth.report.targets import estimate_target

    lines = [{"d_model": 768, "n_layers": 12, "n_heads": 12, "tokens": 2.6e9, "loss": 3.3, "decode_ms": 4.0,
              "params": 124439808, "source": "gpt2-like"},
             {"d_model": 1024, "n_layers": 24, "tokens": 7e9, "loss": 3.0, "flops": 6 * 354823168 * 7e9}]
    table = _table(tmp_path, "\n".join(json.dumps(x) for x in lines) + "\n", "runs.jsonl")
    conv = Conventions(vocab=50257, seq_len=1024, bias="all", head_dim=64)
    import_runs(table, tmp_path / "s", conventions=conv, hardware="h100", context=512)
    study = load_study(tmp_path / "s")
    small = next(r for r in study.results if r.d_model == 768)
    assert small.params == 124439808 and small.measured_decode_ms == pytest.approx(4.0)
    assert small.bench_hardware == "h100-sxm" and small.bench_context == 512
    t = estimate_target(small, hardware="h100", context=512)
    assert t.decode_ms == pytest.approx(4.0) and t.decode_source.startswith("measured on cuda")
    big = next(r for r in study.results if r.d_model == 1024)
    # two sources: each group is named after its source and token budget
    assert big.n_heads == 16 and big.group == "runs-D7B" and small.group == "gpt2-like-D2.6B"
    assert big.measured_decode_ms is None


BAD = [
    ("d_model,n_layers,tokens\n64,2,1000\n", "runs.csv: column 'loss' is missing (required: d_model, n_layers, "
                                              "tokens, loss; map a column of another name with --columns loss=NAME)"),
    (GOOD + "64,x,100000,3.0,2\n", "runs.csv: row 4 (line 5), column n_layers: 'x' is not a number"),
    (GOOD + "64,4,100000,-3.0,2\n", "runs.csv: row 4 (line 5), column loss: '-3.0' must be positive"),
    (GOOD + "64,4,100000,,2\n", "runs.csv: row 4 (line 5), column loss: empty; every row needs its loss"),
    (GOOD + "100,4,100000,3.0,2\n", "runs.csv: row 4 (line 5), column d_model: 100 is not a multiple of the head "
                                    "size 16 (--head-dim); give an n_heads column"),
    ("d_model,n_layers,n_heads,tokens,loss\n64,2,4,1e5,3.0\n96,2,5,1e5,3.0\n",
     "runs.csv: row 2 (line 3), column n_heads: the planner cannot build this shape: "),
    ("d_model,n_layers,tokens,loss,params\n64,2,1e5,3.0,150000\n",
     "runs.csv: row 1 (line 2), column params: 150,000 disagrees with the shape L2-H64-A4: count_params gives "
     "123,200 total parameters (ffn gelu, norm layernorm, bias none, pos learned, vocab 256, tied, max_seq_len 128), "
     "21.75% off, 2% allowed"),
    ("d_model,n_layers,tokens,loss,flops\n64,2,1e5,3.0,1e15\n",
     "runs.csv: row 1 (line 2), column flops: 1e+15 disagrees with the shape L2-H64-A4 at 100,000 tokens"),
    (GOOD + "64,2,100000,3.0,0\n", "runs.csv: row 4 (line 5), column seed: the same run as row 1"),
    ("d_model,n_layers,tokens,loss,lr\n64,2,1e5,3.0,0.001\n64,4,1e5,3.0,\n",
     "runs.csv: row 2 (line 3), column lr: empty while other rows give one"),
    ("d_model,n_layers,tokens,loss\n64,2,1e5,3.0,9\n", "runs.csv: row 1 (line 2) has more cells than the header"),
]


@pytest.mark.parametrize("text,message", BAD, ids=[m.split(":")[1].strip()[:24] for _, m in BAD])
def test_a_malformed_table_is_one_line_and_nothing_is_written(tmp_path, text, message):
    table = _table(tmp_path, text)
    out = tmp_path / "study"
    with pytest.raises(UserError) as exc:
        import_runs(table, out, conventions=Conventions(vocab=256, seq_len=128, head_dim=16))
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)
    assert not out.exists()


def test_the_cli_imports_and_refuses_in_one_line(tmp_path, capsys):
    out = tmp_path / "ex"
    assert main(["study", "import", str(EXAMPLE), "--dir", str(out), "--columns", COLUMNS, "--seq-len", "64"]) == 0
    text = capsys.readouterr().out
    assert "imported 18 runs (9 shapes; groups N25K, N25K@0.5, N100K" in text
    assert "the fairness of their protocol cannot be checked" in text and "note: columns not read: model" in text
    # again into the same folder: refused, the study left as it was
    assert main(["study", "import", str(EXAMPLE), "--dir", str(out), "--columns", COLUMNS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a study (study.sqlite); choose another --dir" in err[0]
    bad = _table(tmp_path, GOOD + "64,4,100000,-3.0,2\n")
    assert main(["study", "import", str(bad), "--dir", str(tmp_path / "b"), "--vocab", "256", "--head-dim", "16",
                 "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["depthwidth study: error: runs.csv: row 4 (line 5), column loss: '-3.0' must be positive"]
    assert not (tmp_path / "b").exists()
    assert main(["study", "import", str(EXAMPLE), "--dir", str(tmp_path / "c"), "--columns", "width=hidden_size"]) == 2
    assert "'width' is not a column of an import" in capsys.readouterr().err
