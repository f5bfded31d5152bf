"""`study import` on tables a hostile or careless user gives: line ends of any platform, cells past the
csv module's limit, text that TOML must hold (emoji, quotes, control characters, a file name that is not
UTF-8), 100 KB cells and flags: each is read correctly or refused in one short line, exit 2, naming the
file and the line, with nothing written."""

from __future__ import annotations

import os
import tomllib

import pytest

from depthwidth.errors import ECHO_CHARS, UserError, echo, echo_repr
from depthwidth.study import parse_spec
from depthwidth.study.imported import _toml, import_runs
from depthwidth.study.importer import Conventions, parse_columns

CONV = Conventions(vocab=256, seq_len=128, head_dim=16)
HEADER = "d_model,n_layers,tokens,loss,seed"
ROWS = ("64,2,100000,3.1,0", "32,8,100000,3.2,0", "128,4,200000,2.8,1")


def _import(tmp_path, data: bytes, name: str = "runs.csv"):
    table = tmp_path / name
    table.write_bytes(data)
    out = tmp_path / "study"
    return table, out, lambda: import_runs(table, out, conventions=CONV)


def _losses(out) -> dict[str, float]:
    from depthwidth.report.data import load_study

    return {r.shape_label: r.val_loss for r in load_study(out).results}


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"], ids=["cr", "crlf", "lf"])
def test_every_line_end_reads_the_same_table(tmp_path, end):
    _, out, run = _import(tmp_path, (end.join((HEADER, *ROWS)) + end).encode())
    assert run().runs == 3
    assert _losses(out) == {"L2-H64-A4": 3.1, "L8-H32-A2": 3.2, "L4-H128-A8": 2.8}


def test_the_issue_table_with_cr_line_ends_imports_from_the_cli(tmp_path, capsys):
    from depthwidth.cli import main

    table = tmp_path / "cr.csv"
    table.write_bytes(b"d_model,n_layers,tokens,loss\r16,1,100000,3.5\r")
    assert main(["study", "import", str(table), "--dir", str(tmp_path / "x"), "--vocab", "256",
                 "--head-dim", "16"]) == 0
    assert "imported 1 runs" in capsys.readouterr().out
    assert _losses(tmp_path / "x") == {"L1-H16-A1": 3.5}


def test_a_cr_inside_a_row_is_a_line_end_and_its_row_is_named(tmp_path):
    _, out, run = _import(tmp_path, f"{HEADER}\n{ROWS[0]}\n64,4\r,100000,3.0,2\n".encode())
    with pytest.raises(UserError) as exc:
        run()
    assert str(exc.value).startswith("runs.csv: row 2 (line 3), column tokens: empty"), str(exc.value)
    assert not out.exists()


@pytest.mark.parametrize("where", ["cell", "header", "quoted"])
def test_a_cell_past_the_csv_limit_is_one_line_naming_the_line(tmp_path, where):
    huge = "7" * 140_000
    text = {"cell": f"{HEADER},label\n{ROWS[0]},a\n{ROWS[1]},{huge}\n",
            "header": f"{HEADER},{huge}\n{ROWS[0]},a\n",
            "quoted": f'{HEADER},label\n{ROWS[0]},"a\n{huge}"\n'}[where]
    _, out, run = _import(tmp_path, text.encode())
    with pytest.raises(UserError) as exc:
        run()
    line = {"cell": 3, "header": 1, "quoted": 3}[where]
    assert str(exc.value) == (f"runs.csv: line {line}: a cell of more than 131,072 characters; no cell of a run "
                              "table is that long")
    assert not out.exists()


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path, cli_error):
    table = tmp_path / "big.csv"
    table.write_text(f"{HEADER},label\n{ROWS[0]},{'x' * 131_073}\n")
    line = cli_error(["study", "import", str(table), "--dir", str(tmp_path / "y"), "--vocab", "256"])
    assert line == ("depthwidth study: error: big.csv: line 2: a cell of more than 131,072 characters; no cell of a "
                    "run table is that long")
    assert not (tmp_path / "y").exists()


# ---- text the spec's TOML holds -------------------------------------------------------------------
@pytest.mark.parametrize("text", ["plain", "emoji \U0001F600 and \u00e9", 'a "quoted" \\ back\\slash', "tab\there",
                                  "line\nbreak\r", "".join(map(chr, range(0x20))) + "\x7f", "\U0010FFFF\u2028"])
def test_a_toml_string_reads_back_as_the_same_text(text):
    assert tomllib.loads(f"v = {_toml(text)}")["v"] == text
    assert all(ch not in _toml(text) for ch in "\n\r\x00\x7f")


def test_a_lone_surrogate_has_no_toml_form_and_becomes_the_replacement_character():
    assert tomllib.loads(f"v = {_toml('a' + chr(0xDCFF) + 'b')}")["v"] == "a\ufffdb"


def test_an_emoji_in_a_source_and_in_the_file_name_imports(tmp_path):
    from depthwidth.report.data import load_study

    text = f"{HEADER},source,label\n{ROWS[0]},lab \U0001F9EA \"x\" \\,run \U0001F680\n"
    _, out, run = _import(tmp_path, text.encode(), name="runs \U0001F600.csv")
    assert run().sources == ('lab \U0001F9EA "x" \\',)
    study = load_study(out)
    assert 'lab \U0001F9EA "x" \\' in study.description and "runs \U0001F600.csv" in study.description
    assert [r.group for r in study.results] == ["run \U0001F680"]


@pytest.mark.skipif(os.name != "posix", reason="file names as bytes")
def test_a_file_name_that_is_not_utf8_imports_under_its_replacement(tmp_path):
    from depthwidth.report.data import load_study
    from depthwidth.study.imported import imported_info

    raw = os.fsencode(tmp_path) + b"/bad\xff.csv"
    try:
        with open(raw, "wb") as fh:
            fh.write(f"{HEADER}\n{ROWS[0]}\n".encode())
    except OSError:  # a filesystem that takes UTF-8 names only
        pytest.skip("this filesystem refuses the name")
    out = tmp_path / "study"
    assert import_runs(os.fsdecode(raw), out, conventions=CONV).runs == 1
    assert imported_info(out)["table"] == "bad\ufffd.csv"
    study = load_study(out)
    assert "imported from bad\ufffd.csv" in study.description and study.results[0].group == "D100K"


# ---- echoed input is cut -------------------------------------------------------------------------
def test_echo_cuts_long_text_and_says_how_long_it_was():
    assert echo("short") == "short" and echo("x" * ECHO_CHARS) == "x" * ECHO_CHARS
    assert echo("x" * 100_000) == "x" * ECHO_CHARS + "... (100,000 characters)"
    assert echo_repr("ab") == "'ab'" and echo_repr("y" * 500) == "'" + "y" * (ECHO_CHARS - 1) + "... (502 characters)"


def test_a_100kb_cell_is_cut_in_the_message(tmp_path):
    _, out, run = _import(tmp_path, f"{HEADER}\n64,2,100000,{'x' * 100_000},0\n".encode())
    with pytest.raises(UserError) as exc:
        run()
    message = str(exc.value)
    assert message.startswith("runs.csv: row 1 (line 2), column loss: 'xxx") and len(message) < 300, message[:400]
    assert message.endswith("... (100,002 characters) is not a number")
    assert not out.exists()


def test_a_100kb_flag_is_cut_in_the_message():
    for value, start in ((f"{'w' * 100_000}=x", "--columns: 'www"), (f"{'w' * 100_000}", "--columns 'www")):
        with pytest.raises(UserError) as exc:
            parse_columns(value)
        assert str(exc.value).startswith(start) and len(str(exc.value)) < 600, str(exc.value)[:300]
        assert "(100,002 characters)" in str(exc.value) or "(100,004 characters)" in str(exc.value)


def test_a_column_mapped_to_a_100kb_name_is_cut(tmp_path):
    table, out, _ = _import(tmp_path, f"{HEADER}\n{ROWS[0]}\n".encode())
    with pytest.raises(UserError) as exc:
        import_runs(table, out, columns={"d_model": "h" * 100_000}, conventions=CONV)
    assert len(str(exc.value)) < 700 and "the table has no column 'hhh" in str(exc.value)


def test_a_100kb_spec_value_and_key_are_cut():
    base = ('name = "n"\nhardware = "cpu"\n[data]\ncorpus = "x.txt"\nseq_len = 32\n[lr]\ngrid = [1e-3]\n'
            "[[shape]]\nn_layers = 1\nd_model = 16\nn_heads = 2\n")
    for old, new, want in (('name = "n"', f'name = "{"x" * 100_000}"', "s.toml:1: name: expected a name"),
                           ("seq_len = 32", f'seq_len = "{"9" * 100_000}"', "s.toml:5: data.seq_len: expected an"),
                           ("seq_len = 32", f"{'s' * 100_000} = 3", "s.toml:5: data.sss"),
                           ("seq_len = 32", f"seq_len = [{'1, ' * 50_000}1]", "s.toml:5: data.seq_len: expected")):
        with pytest.raises(UserError) as exc:
            parse_spec(base.replace(old, new), source="s.toml")
        message = str(exc.value)
        assert message.startswith(want) and len(message) < 700 and "characters)" in message, message[:300]


# ---- what a store holds -------------------------------------------------------------------------
def test_an_integer_past_the_store_is_refused(tmp_path):
    _, out, run = _import(tmp_path, f"{HEADER}\n64,2,1e30,3.0,0\n".encode())
    with pytest.raises(UserError) as exc:
        run()
    assert str(exc.value).startswith("runs.csv: row 1 (line 2), column tokens: '1e30' is too large (at most "
                                     "9,223,372,036,854,775,807")
    assert not out.exists()


def test_two_rows_of_one_run_under_two_labels_are_refused_not_merged(tmp_path):
    text = f"{HEADER},label\n64,2,100000,3.1,0,a\n64,2,100000,3.3,0,b\n"
    _, out, run = _import(tmp_path, text.encode())
    with pytest.raises(UserError) as exc:
        run()
    assert str(exc.value).startswith("runs.csv: row 2 (line 3), column seed: the same run as row 1 (same shape, "
                                     "tokens, lr, seed and source"), str(exc.value)
    assert not out.exists()
