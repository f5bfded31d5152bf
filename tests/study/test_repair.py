"""A damaged study store is refused in one line naming the repair, and `depthwidth study repair` rebuilds
it from the spec and the run folders to exactly the stored losses and curves the study had."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3

import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.study import Store, run_study
from depthwidth.study.repair import repair_study
from depthwidth.study.runner import SPEC_FILE, StudyLock
from depthwidth.study.store import STORE_FILE


@pytest.fixture
def study(reference, tmp_path):
    """A copy of the finished tiny reference study (4 training runs, 2 benchmarks)."""
    folder = tmp_path / "study"
    shutil.copytree(reference.dir, folder)
    return folder


def bench_results(folder) -> dict:
    with Store.open(folder) as store:
        return {r.run_id: r.data for r in store.results(kind="bench")}


def _random_bytes_inside(path, *, seed: int) -> None:
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for i in range(4096, len(data)):  # the header page survives, every other page is noise
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))


def test_random_bytes_inside_the_store_are_one_line_then_repaired_to_the_same_losses(study, reference, numbers, capsys,
                                                                                    cli_error):
    before, bench_before = numbers(reference.dir), bench_results(reference.dir)
    _random_bytes_inside(study / STORE_FILE, seed=1)
    for argv in (["study", "status", str(study)], ["report", str(study), "-o", str(study / "r")],
                 ["study", "run", str(reference.spec), "--dir", str(study)]):
        err = cli_error(argv)
        assert f"{study / STORE_FILE}: not a readable study store: SQLite finds it damaged" in err
        assert f"`depthwidth study repair {study}` rebuilds the store" in err
    assert main(["study", "repair", str(study), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["store"].startswith("damaged (") and report["moved_to"] == str(study / "study.sqlite.damaged")
    assert len(report["recovered"]) == 6 and report["pending"] == [] and report["unusable"] == []
    assert numbers(study) == before and bench_results(study) == bench_before
    assert (study / "study.sqlite.damaged").is_file()  # nothing deleted


@pytest.mark.parametrize("damage", ["truncated", "empty", "missing"])
def test_a_truncated_empty_or_missing_store_is_rebuilt(study, reference, numbers, cli_error, damage):
    path = study / STORE_FILE
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "empty":
        path.write_bytes(b"")
        assert "not a readable study store: it is empty (0 bytes)" in cli_error(["study", "status", str(study)])
    else:
        path.unlink()
    report = repair_study(study)
    assert report.store == "missing" if damage == "missing" else report.store.startswith("damaged")
    assert report.spec_source == str(study / SPEC_FILE)  # the store's copy is gone: the folder's spec.toml
    assert len(report.recovered) == 6 and numbers(study) == numbers(reference.dir)


def test_an_empty_store_reports_no_schema_version_never_none(tmp_path, cli_error):
    sqlite3.connect(tmp_path / STORE_FILE).execute("CREATE TABLE meta (key TEXT, value TEXT)").connection.commit()
    err = cli_error(["study", "status", str(tmp_path)])
    assert "it records no schema version (not a depthwidth study, or a damaged one)" in err
    assert "schema version None" not in err


def test_a_hand_broken_run_config_names_the_run_and_is_repaired(study, reference, numbers, cli_error):
    with Store.open(study) as store:
        run_id = store.runs(kind="train")[1].run_id
    con = sqlite3.connect(study / STORE_FILE)
    con.execute("UPDATE runs SET config = ? WHERE run_id = ?", ('{"shape": {"n_layers": 1', run_id))
    con.commit()
    con.close()
    err = cli_error(["study", "show", str(study)])
    assert f"study store: run {run_id[:16]}: its stored config is not valid JSON" in err
    report = repair_study(study)
    assert report.store.startswith("damaged (study store: run ") and len(report.recovered) == 6
    assert numbers(study) == numbers(reference.dir)


@pytest.mark.parametrize("value", ["[1, 2]", '"text"', "17"])
def test_a_results_row_of_the_wrong_json_type_is_one_line(study, cli_error, value):
    con = sqlite3.connect(study / STORE_FILE)
    con.execute("UPDATE results SET result = ?", (value,))
    con.commit()
    con.close()
    assert "its stored result is" in cli_error(["study", "status", str(study)])


def test_a_results_column_of_the_wrong_type_is_one_line(study, cli_error):
    con = sqlite3.connect(study / STORE_FILE)
    con.execute("UPDATE results SET val_loss = 'low'")
    con.commit()
    con.close()
    assert "its stored val_loss is 'low', not a number" in cli_error(["study", "status", str(study)])


def test_a_folder_holding_another_runs_result_is_not_used(study):
    with Store.open(study) as store:
        a, b = [r.run_id for r in store.runs(kind="train")][:2]
    shutil.copy(study / "runs" / a[:16] / "result.json", study / "runs" / b[:16] / "result.json")
    (study / STORE_FILE).unlink()
    report = repair_study(study)
    assert report.pending == (b,) and len(report.recovered) == 5
    assert report.unusable == ((f"runs/{b[:16]}", "its result.json is the result of another run (shape, data or "
                                                  "settings differ)"),)


def test_without_a_spec_the_repair_asks_for_one(study, reference, cli_error):
    (study / STORE_FILE).unlink()
    (study / SPEC_FILE).unlink()
    err = cli_error(["study", "repair", str(study)])
    assert f"give the spec the study was run with: depthwidth study repair {study} --spec SPEC" in err
    assert len(repair_study(study, spec=reference.spec).recovered) == 6


def test_repair_is_refused_while_the_study_runs(study):
    with StudyLock(study):
        with pytest.raises(UserError, match="is being run by another process"):
            repair_study(study)


def test_a_truncated_checkpoint_of_an_unfinished_run_resumes_from_the_one_before(study, reference, numbers):
    with Store.open(study) as store:
        run_id = store.runs(kind="train")[0].run_id
    folder = study / "runs" / run_id[:16]
    (folder / "result.json").unlink()  # the run was killed after its last checkpoint, before finishing
    ckpt = folder / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    (study / STORE_FILE).unlink()
    assert repair_study(study).pending == (run_id,)
    report = run_study(reference.spec, study_dir=study)
    assert (report.completed, report.failed, report.skipped) == (1, 0, 5)
    assert numbers(study) == numbers(reference.dir)
    with Store.open(study) as store:
        (note,) = store.result(run_id).data["resumes"]
    assert note.startswith("resumed at step 20 from checkpoint.prev.pt: checkpoint.pt unreadable")
    assert os.path.getsize(ckpt) > 1000


def test_an_intact_store_is_left_as_it_was(study, reference, numbers):
    report = repair_study(study)
    assert (report.store, report.finished_before, report.recovered, report.rewritten) == ("intact", 6, (), ())
    assert numbers(study) == numbers(reference.dir)


def test_a_hand_edited_loss_is_restored_from_the_run_folder(study, reference, numbers):
    with Store.open(study) as store:
        run_id = store.runs(kind="train")[2].run_id
    con = sqlite3.connect(study / STORE_FILE)
    con.execute("UPDATE results SET val_loss = 0.01 WHERE run_id = ?", (run_id,))
    con.execute("UPDATE curves SET train_loss = 0.02 WHERE run_id = ? AND idx = 3", (run_id,))
    con.commit()
    con.close()
    report = repair_study(study)
    assert report.store == "intact" and report.rewritten == (run_id,) and report.recovered == ()
    assert numbers(study) == numbers(reference.dir)


def test_a_schema_whose_text_is_not_utf8_is_one_line_and_repaired(study, reference, numbers, cli_error):
    path = study / STORE_FILE
    data = bytearray(path.read_bytes())
    at = data.find(b"CREATE TABLE runs")
    data[at + 20:at + 24] = b"\xa9" * 4  # SQLite's own message then carries bytes Python cannot decode
    path.write_bytes(bytes(data))
    err = cli_error(["study", "status", str(study)])
    assert "not a readable study store: SQLite cannot read it (UnicodeDecodeError: " in err
    assert len(repair_study(study).recovered) == 6 and numbers(study) == numbers(reference.dir)


@pytest.mark.parametrize("sql, message", [
    ("UPDATE meta SET value = x'00ff' WHERE key = 'spec_text'", "its recorded spec_text is bytes, not text"),
    ("UPDATE runs SET shape_label = x'07' WHERE rowid = 1", "its stored shape_label is b'\\x07', not text"),
    ("UPDATE runs SET grp = x'00' WHERE rowid = 2", "its stored grp is b'\\x00', not text"),
])
def test_a_stored_value_of_the_wrong_type_is_one_line_and_repaired(study, reference, numbers, cli_error, sql, message):
    con = sqlite3.connect(study / STORE_FILE)
    con.execute(sql)
    con.commit()
    con.close()
    assert message in cli_error(["study", "status", str(study)])
    repair_study(study)
    assert numbers(study) == numbers(reference.dir)
    assert main(["study", "status", str(study)]) == 0


def test_a_folder_that_is_no_study_is_refused_and_left_alone(tmp_path, cli_error):
    assert "not a study folder (it holds no study.sqlite, spec.toml or runs/)" in \
        cli_error(["study", "repair", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []  # not even a lock file
