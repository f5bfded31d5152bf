"""The learning-rate search inside a study, with a stand-in for training: every shape spends the same
max_trials, a shape whose optimum lies beyond the budget is a protocol warning, a killed and resumed
study proposes the same trials, transfer reuses the proxy's learning rate and spends the saved trials
on seeds, a factor trains each budget per parametrization, and the fairness check knows each mode."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from depthwidth.errors import UserError
from depthwidth.study import Store, run_study, summarize
from depthwidth.study.fairness import check_fairness
from depthwidth.study.jobs import Outcome
from depthwidth.study.lr_plan import stored_modes

SPEC = """\
name = "search"
seeds = [0, 1]
[data]
corpus = "{corpus}"
seq_len = 16
batch_size = 2
[train]
steps = 3
{train}
[lr]
grid = [1e-3, 2e-3]
search = "bracket"
max_trials = 5
step = 2.0
{lr}
[bench]
enabled = false
[[shape]]
n_layers = 1
d_model = 32
n_heads = 2
[[shape]]
n_layers = 2
d_model = 16
n_heads = 2
"""


class Bowl:
    """Loss = a parabola in log lr whose minimum moves as 1/width (as under SP): 8e-3 at width 32,
    1.6e-2 at width 16; seed s adds 0.01 * s. Every call is appended to `log` (the local executor may
    run it in worker processes); from call `kill_at` on, every run fails (a study stopped half-way)."""

    def __init__(self, log, kill_at: int | None = None) -> None:
        self.log = str(log)
        self.kill_at = kill_at

    @property
    def calls(self) -> list[str]:
        with open(self.log, "a+") as f:
            f.seek(0)
            return f.read().split()

    def __call__(self, job, progress=None) -> Outcome:
        import fcntl

        t = job.config["train"]
        with open(self.log, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            n = len(f.read().split())
            if self.kill_at is not None and n >= self.kill_at:
                return Outcome(run_id=job.run_id, status="failed", result=None, error="stopped")
            f.write(job.run_id + "\n")
        optimum = 8e-3 * 32 / job.config["shape"]["d_model"]
        loss = 3.0 + 0.5 * math.log(t["lr"] / optimum) ** 2 + 0.01 * t["seed"]
        result = {"val_loss": loss, "tokens": 96, "batch_stream_hash": f"seed{t['seed']}", "train_seconds": 0.01}
        curve = ({"step": 3, "tokens": 96, "val_loss": loss},)
        return Outcome(run_id=job.run_id, status="completed", result=result, curve=curve, wall_seconds=0.01)


def write(tmp_path, tiny_corpus, *, train: str = "", lr: str = "") -> str:
    path = tmp_path / "search.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus, train=train, lr=lr))
    return str(path)


def summary_of(folder):
    with Store.open(folder) as store:
        return summarize(store), store.runs(), {r.run_id: r for r in store.results()}, store.spec()


def test_every_shape_spends_the_same_budget_and_an_unbracketed_one_is_a_warning(tmp_path, tiny_corpus):
    report = run_study(write(tmp_path, tiny_corpus), study_dir=tmp_path / "s", job_fn=Bowl(tmp_path / "log"))
    assert report.total == report.completed == 20  # 2 shapes x 5 learning rates x 2 seeds
    summary, runs, _, _ = summary_of(tmp_path / "s")
    rows = {r.shape_label: r for r in summary.rows}
    wide, narrow = rows["L1-H32-A2"], rows["L2-H16-A2"]
    # width 32: 1e-3, 2e-3, then 4e-3, 8e-3, 1.6e-2 (8e-3 best and inside: bracketed, exact parabola)
    assert list(wide.lr_losses) == [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
    assert (wide.best_lr, wide.lr_bracketed, wide.lr_edge, wide.lr_mode) == (8e-3, True, None, "bracket")
    assert wide.lr_optimum == pytest.approx(8e-3, rel=1e-3) and wide.warning is None
    assert wide.seed_losses == pytest.approx((3.0, 3.01))
    # width 16: the same 5 trials end at 1.6e-2, its optimum: still the top edge when the budget is spent
    assert list(narrow.lr_losses) == [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
    assert (narrow.best_lr, narrow.lr_bracketed, narrow.lr_edge) == (1.6e-2, False, "high")
    assert "not bracketed" in narrow.warning and "max_trials=5" in narrow.warning
    assert any("L2-H16-A2" in w and "not bracketed" in w for w in summary.warnings)
    assert summary.fairness.fair and {r.lr_trials for r in runs} == {5}


def test_a_killed_and_resumed_study_proposes_the_same_trials(tmp_path, tiny_corpus):
    spec = write(tmp_path, tiny_corpus)
    run_study(spec, study_dir=tmp_path / "whole", job_fn=Bowl(tmp_path / "whole.log"))
    _, whole, _, _ = summary_of(tmp_path / "whole")
    for kill_at in (3, 9):
        folder = tmp_path / f"stopped{kill_at}"
        first = run_study(spec, study_dir=folder, job_fn=Bowl(tmp_path / f"{kill_at}.log", kill_at=kill_at))
        assert first.completed == kill_at and first.failed > 0
        rest = Bowl(tmp_path / f"{kill_at}.rest.log")
        run_study(spec, study_dir=folder, job_fn=rest)
        assert len(rest.calls) == 20 - kill_at  # the finished trials are reused, the rest proposed again
        _, runs, _, _ = summary_of(folder)
        assert sorted(r.run_id for r in runs) == sorted(r.run_id for r in whole)
        assert {r.status for r in runs} == {"completed"}


def test_transfer_tunes_the_proxy_and_spends_the_saved_trials_on_seeds(tmp_path, tiny_corpus):
    spec = write(tmp_path, tiny_corpus, train='parametrization = ["sp", "mup"]\nbase_width = 16',
                 lr='transfer_from = "L1-H32-A2"\ntransfer_seeds = 3')
    run_study(spec, study_dir=tmp_path / "s", job_fn=Bowl(tmp_path / "log"))
    summary, runs, results, stored_spec = summary_of(tmp_path / "s")
    rows = {(r.group, r.shape_label): r for r in summary.rows}
    assert sorted({r.group for r in runs}) == ["shapes-mup", "shapes-sp"]
    # sp: each shape bracketed on its own (as in the first test)
    assert rows[("shapes-sp", "L2-H16-A2")].best_lr == 1.6e-2 and rows[("shapes-sp", "L2-H16-A2")].lr_mode == "bracket"
    # mup: the proxy's 5 trials x 2 seeds, then every shape at the proxy's best (8e-3) with seeds 0, 1, 2
    proxy, other = rows[("shapes-mup", "L1-H32-A2")], rows[("shapes-mup", "L2-H16-A2")]
    assert list(proxy.lr_losses) == [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2] and proxy.best_lr == 8e-3
    assert (other.lr_mode, other.lr_transfer_from, list(other.lr_losses)) == ("transfer", "L1-H32-A2", [8e-3])
    assert proxy.n_seeds == other.n_seeds == 3 and other.parametrization == "mup"
    assert other.seed_losses == pytest.approx([3.0 + 0.5 * math.log(0.5) ** 2 + 0.01 * s for s in range(3)])
    mup_runs = [r for r in runs if r.group == "shapes-mup"]
    assert len(mup_runs) == 10 + 1 + 3  # proxy search, the proxy's third seed, the other shape's 3 seeds
    assert summary.fairness.fair, summary.fairness.findings
    # the fairness check knows each mode: a transferred shape at another LR, a search beyond its budget
    modes = stored_modes(stored_spec, runs)
    moved = [replace(r, lr=4e-3) if r.group == "shapes-mup" and r.shape_label == "L2-H16-A2" and r.seed == 2 else r
             for r in runs]
    unfair = check_fairness(moved, results, modes=modes)
    assert unfair.fields == ("lr",) and "shapes-mup" in unfair.findings[0].scope
    tight = {g: replace(m, max_trials=4) for g, m in modes.items()}
    over = check_fairness(runs, results, modes=tight)
    assert {f.scope for f in over.findings} == {"group 'shapes-sp' (over the search budget)",
                                                "group 'shapes-mup' (over the search budget)"}
    # without the modes (every group read as a grid) the transfer group looks unfair: 5 trials against 1
    assert "lr_trials" in check_fairness(runs, results).fields


def test_spec_errors(tmp_path, tiny_corpus):
    from depthwidth.study.runner import prepare

    with pytest.raises(UserError, match="lr.transfer_from.*parametrization that transfers"):
        prepare(write(tmp_path, tiny_corpus, lr='transfer_from = "L1-H32-A2"'))
    with pytest.raises(UserError, match="L9-H8-A1.*is not a shape of the group"):
        prepare(write(tmp_path, tiny_corpus, train='parametrization = "completep"', lr='transfer_from = "L9-H8-A1"'))
    with pytest.raises(UserError, match="transfer_seeds=1 is fewer than the study's 2 seeds"):
        prepare(write(tmp_path, tiny_corpus, train='parametrization = "mup"',
                      lr='transfer_from = "smallest"\ntransfer_seeds = 1'))
    with pytest.raises(UserError, match="train.parametrization"):
        prepare(write(tmp_path, tiny_corpus, train='parametrization = ["sp", "xp"]'))
    text = SPEC.format(corpus=tiny_corpus, train="", lr="").replace("max_trials = 5\n", "")
    (tmp_path / "no_budget.toml").write_text(text)
    with pytest.raises(UserError, match="needs max_trials"):
        prepare(tmp_path / "no_budget.toml")
