import json

import pytest

from depthwidth.cli import main


def test_report_command_writes_the_page(fixture_study, tmp_path, capsys):
    folder, _ = fixture_study
    out = tmp_path / "out"
    assert main(["report", str(folder), "-o", str(out), "--bootstrap", "5", "--hardware", "h100"]) == 0
    text = capsys.readouterr().out
    assert f"report: {out / 'index.html'}" in text
    assert "2 run(s) did not complete" in text
    assert (out / "index.html").is_file() and (out / "results.csv").is_file()
    assert "predicted for h100-sxm" in (out / "index.html").read_text()


def test_recommend_json_under_a_latency_limit(fixture_study, capsys):
    folder, _ = fixture_study
    # measured on the study's cpu: L4-H96 decodes in ~1.53 ms, L2-H128 in ~1.21 ms
    assert main(["recommend", str(folder), "--max-decode-ms", "1.3", "--hardware", "cpu", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["best"] == "P400k/L4-H96-A6" and rec["chosen"] == "P400k/L2-H128-A8"
    assert rec["decided_by"] == "loss"
    assert rec["trade"].startswith("+0.17") and "lower decode latency" in rec["trade"]
    chosen = next(c for c in rec["candidates"] if c["label"] == "L2-H128-A8")
    assert chosen["decode_source"] == "measured on cpu (the study's machine)" and chosen["feasible"]


def test_recommend_on_the_studys_machine(fixture_study, capsys):
    folder, _ = fixture_study
    assert main(["recommend", str(folder), "--max-decode-ms", "1.3", "--hardware", "study", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["chosen"] == "P400k/L2-H128-A8" and rec["constraints"]["hardware"] == "study"
    # "measured" is the machine a command runs on, not the study's: one line naming "study"
    assert main(["recommend", str(folder), "--hardware", "measured"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "use --hardware study for the study's own measurements" in err


def test_recommend_with_nothing_feasible_exits_1(fixture_study, capsys):
    folder, _ = fixture_study
    assert main(["recommend", str(folder), "--max-decode-ms", "0.001", "--hardware", "h100"]) == 1
    assert "No shape meets the limits" in capsys.readouterr().out


def test_bad_input_is_one_line_exit_2(fixture_study, tmp_path, capsys):
    folder, _ = fixture_study
    assert main(["recommend", str(tmp_path), "--max-decode-ms", "1"]) == 2
    assert "holds no study" in capsys.readouterr().err
    assert main(["recommend", str(folder), "--hardware", "h9000"]) == 2
    assert "unknown hardware 'h9000'" in capsys.readouterr().err
    assert main(["recommend", str(folder), "--budget", "P1T"]) == 2
    assert "group='P1T' is not in this study" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["report", str(folder), "-o", str(tmp_path / "file"), "--bootstrap", "2"]) == 2


@pytest.mark.slow  # three full reports: ~17 s on 2 cores
def test_a_report_onto_a_full_disk_is_one_line_and_leaves_nothing(fixture_study, tmp_path, monkeypatch, cli_error):
    """The disk fills while results.csv is written (after the page and some plots): one line naming the
    folder; a new folder is gone, an earlier report is left as it was."""
    import errno
    import os
    from pathlib import Path

    from depthwidth.report import export

    folder, _ = fixture_study
    real = export.write_text

    def full(path, text):
        if Path(path).name == "results.csv":
            Path(path).write_text(text[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, text)

    argv = ["report", str(folder), "--bootstrap", "2", "--hardware", "h100", "-o"]
    out = tmp_path / "new" / "report"
    monkeypatch.setattr(export, "write_text", full)
    assert cli_error([*argv, str(out)]) == (f"depthwidth report: error: {out}: cannot write the report (No space "
                                            "left on device); nothing of it was left there")
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    old = tmp_path / "old"
    assert main([*argv, str(old)]) == 0
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    assert {"index.html", "results.csv", "basin.png"} <= set(before)
    monkeypatch.setattr(export, "write_text", full)
    assert "No space left on device" in cli_error([*argv, str(old)])
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
