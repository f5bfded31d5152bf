"""A finished study whose `study.sqlite` was damaged: truncated, overwritten with random bytes, a page
zeroed, or rows and columns edited by hand to values of the wrong type. The commands that read a study
(status, show, recommend, report, run) must end in exit 0 or exit 2 with one line and leave the folder
as it was; `study repair` must then succeed and give back a store that reads, with the losses the
study had."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import strategies as st

#: values a hand edit may leave in any column
SQL_HOSTILE = (None, "", "x", "[1, 2]", "{", '{"shape": 5}', "{}", "17", b"\x00\xff", -1, 0, 10**18, 1.5, 1e308,
               "completed", "train")
EDITABLE = {"runs": ("config", "status", "lr", "seed", "kind", "shape_label", "attempts", "in_spec", "grp"),
            "results": ("result", "val_loss", "tokens", "params", "batch_stream_hash"),
            "curves": ("step", "train_loss", "val_loss", "extra"),
            "meta": ("value",)}


@st.composite
def damages(draw):
    kind = draw(st.sampled_from(["truncate", "bytes", "page", "sql", "sql", "sql", "delete"]))
    if kind == "sql":
        table = draw(st.sampled_from(sorted(EDITABLE)))
        return ("sql", table, draw(st.sampled_from(EDITABLE[table])), draw(st.sampled_from(SQL_HOSTILE)),
                draw(st.integers(0, 3)))
    return (kind, draw(st.integers(0, 2**31)))


def damage(path: Path, how: tuple) -> None:
    kind = how[0]
    if kind == "sql":
        _, table, column, value, row = how
        con = sqlite3.connect(path)
        skip = "WHERE key != 'schema_version'" if table == "meta" else ""  # version 1 would start an upgrade
        try:
            con.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT rowid FROM {table} {skip} "
                        "ORDER BY rowid LIMIT 1 OFFSET ?)", (value, row))
            con.commit()
        except sqlite3.IntegrityError:  # refused by the schema's own checks: leave it
            pass
        con.close()
        return
    rng = random.Random(how[1])
    data = bytearray(path.read_bytes())
    if kind == "truncate":
        data = data[: rng.randrange(len(data))]
    elif kind == "bytes":
        for _ in range(rng.randint(1, 16)):
            at = rng.randrange(len(data))
            data[at:at + 8] = bytes(rng.randrange(256) for _ in range(8))
    elif kind == "page":
        page = rng.randrange(max(1, len(data) // 4096))
        data[page * 4096:(page + 1) * 4096] = bytes(4096)
    else:  # delete rows
        con = sqlite3.connect(path)
        con.execute(f"DELETE FROM {rng.choice(['runs', 'results', 'curves', 'meta'])} WHERE rowid % 2 = 0")
        con.commit()
        con.close()
        return
    path.write_bytes(bytes(data))


def losses(folder: Path) -> dict:
    from depthwidth.study import Store

    with Store.open(folder) as store:
        return {r.run_id: r.val_loss for r in store.results(in_spec=None)}


def test_damaged_stores(harness, fuzz_paths, stand_ins, driver_stand_in, tmp_path_factory, profile):
    root = tmp_path_factory.mktemp("fuzz-store")
    before = losses(Path(fuzz_paths["study"]))
    counter = iter(range(10**9))

    def check(how: tuple) -> None:
        study = root / f"s{next(counter)}"
        shutil.copytree(fuzz_paths["study"], study, ignore=shutil.ignore_patterns("tokens", "report"))
        damage(study / "study.sqlite", how)
        state = harness.snapshot(study)
        for argv in (["study", "status", str(study)], ["study", "show", str(study)], ["recommend", str(study)],
                     ["report", str(study), "-o", str(root / "report")], ["study", "show", str(study), "0"]):
            harness.check("store", argv)
            assert harness.snapshot(study) == state, f"{' '.join(argv)} changed the study folder after {how}"
        harness.check("store", ["study", "run", fuzz_paths["spec"], "--dir", str(study)])
        repaired = harness.check("store", ["study", "repair", str(study)])
        assert repaired.code == 0, f"repair refused after {how}: {repaired.stderr}"
        assert harness.check("store", ["study", "status", str(study)]).code == 0, f"unreadable after {how}"
        assert losses(study) == before, f"repair after {how} did not restore the losses"
        shutil.rmtree(study)

    harness.fuzz(damages(), check, profile=profile, scale=0.5)


@pytest.mark.parametrize("how", [("truncate", 1), ("sql", "results", "result", "[1, 2]", 0)])
def test_a_damaged_store_is_repaired_by_the_cli(harness, fuzz_paths, tmp_path, how):
    study = tmp_path / "study"
    shutil.copytree(fuzz_paths["study"], study)
    damage(study / "study.sqlite", how)
    assert harness.run(["study", "status", str(study)]).code == 2
    assert harness.run(["study", "repair", str(study)]).code == 0
    assert losses(study) == losses(Path(fuzz_paths["study"]))
