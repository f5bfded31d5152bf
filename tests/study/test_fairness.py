"""Fairness is checked from the store: a tampered batch stream, token budget or LR-trial count makes
`study status` call the study unfair and name the field."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest

from depthwidth.study import Store, summarize
from depthwidth.study.store import STORE_FILE


def status(folder) -> tuple[dict, str]:
    def run(*extra):
        proc = subprocess.run([sys.executable, "-m", "depthwidth", "study", "status", str(folder), *extra],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    return json.loads(run("--json")), run()


@pytest.fixture
def copy(reference, tmp_path):
    folder = tmp_path / "study"
    shutil.copytree(reference.dir, folder)
    return folder


def tamper(folder, sql: str, *args) -> None:
    con = sqlite3.connect(folder / STORE_FILE)
    con.execute(sql, args)
    con.commit()
    con.close()


def first_train_run(folder) -> str:
    with Store.open(folder) as store:
        return store.runs(kind="train")[0].run_id


def test_reference_study_is_fair_and_selects_the_best_lr(reference):
    data, text = status(reference.dir)
    assert data["fair"] and data["complete"] and data["counts"]["completed"] == 6
    assert "fair: yes" in text
    with Store.open(reference.dir) as store:
        summary = summarize(store)
        losses = {(r.shape_label, r.lr): store.result(r.run_id).val_loss for r in store.runs(kind="train")}
    for choice in summary.choices:
        mine = {lr: v for (label, lr), v in losses.items() if label == choice.shape_label}
        assert choice.best_lr == min(mine, key=mine.get) and choice.best_loss == min(mine.values())
        assert choice.edge in ("low", "high") and "of its grid [0.001, 0.004]" in choice.warning  # 2 trials
    assert [r["shape_label"] for r in data["shapes"]] == ["L1-H32-A2", "L4-H16-A2"]


def test_tampered_batch_stream_is_unfair(copy):
    tamper(copy, "UPDATE results SET batch_stream_hash = 'f00' WHERE run_id = ?", first_train_run(copy))
    data, text = status(copy)
    assert not data["fair"] and data["fairness"]["fields"] == ["batch_stream_hash"]
    assert "fair: NO - differs: batch_stream_hash" in text
    assert "f00 (1 run:" in data["fairness"]["findings"][0]["message"]


def test_tampered_token_budget_is_unfair(copy):
    run_id = first_train_run(copy)
    with Store.open(copy) as store:
        config = store.run(run_id).config
    config["train"]["tokens"] += 256
    tamper(copy, "UPDATE runs SET config = ? WHERE run_id = ?", json.dumps(config), run_id)
    data, _ = status(copy)
    assert not data["fair"] and data["fairness"]["fields"] == ["tokens"]


def test_tampered_lr_trial_count_is_unfair(copy):
    tamper(copy, "UPDATE runs SET lr_trials = 3 WHERE run_id = ?", first_train_run(copy))
    data, text = status(copy)
    assert not data["fair"] and data["fairness"]["fields"] == ["lr_trials"]
    assert "lr_trials differs within study" in text
