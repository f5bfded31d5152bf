"""`[lr] verify = "adapt"` (`depthwidth.study.verify`): the transfer check of `verify = 2`, then, where the optimum
moved, a bracketed re-tune of every shape of that scale within `adapt_trials` extra learning rates. A stand-in
job function replaces training: its loss is a parabola in log LR whose optimum is the proxy's LR at the small
scale and 4x it at the large one (or the proxy's everywhere: the transfer holds)."""

from __future__ import annotations

import math

import pytest

from depthwidth.study import Store, run_study, summarize
from depthwidth.study.expand import expand
from depthwidth.study.fairness import check_fairness
from depthwidth.study.jobs import Outcome
from depthwidth.study.lr_plan import plan_runs, stored_modes
from depthwidth.study.spec import load_spec
from depthwidth.study.verify import adapt_trial_counts, check_transfer, is_adapt, is_verify, split_runs

SPEC = """
name = "adapt"
seeds = [0, 1]
hardware = "cpu"
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 8
[[budget]]
label = "small"
params = 20000
depths = [1, 2]
tolerance = 0.3
[[budget]]
label = "large"
params = 60000
depths = [1, 2, 3]
tolerance = 0.3
[train]
steps = 8
parametrization = "completep"
base_width = 40
base_depth = 1
[lr]
grid = [0.003, 0.01, 0.03]
transfer_from = "L1-H40-A5"
transfer_seeds = 2
{verify}
[bench]
enabled = false
[execution]
threads = 1
"""

PROXY_LR = 0.01  # the small scale's optimum: the middle of the grid
STEP = math.sqrt(10)  # the grid's mean ratio, the verification runs' factor


class FakeJobs:
    """Loss = 3 + (log(lr / optimum))**2 + 0.01 * seed; the optimum is PROXY_LR below 40k parameters and
    `moved` x PROXY_LR above (the large scale)."""

    def __init__(self, moved: float = 4.0) -> None:
        self.moved = moved
        self.calls: list[dict] = []

    def optimum(self, shape: dict) -> float:
        from depthwidth.shapes.params import count_params
        from depthwidth.shapes.shape import Shape

        return PROXY_LR * (self.moved if count_params(Shape.from_dict(shape)).total > 40_000 else 1.0)

    def loss(self, config: dict) -> float:
        return 3.0 + math.log(config["train"]["lr"] / self.optimum(config["shape"])) ** 2 + 0.01 * config["train"]["seed"]

    def __call__(self, job, progress=None) -> Outcome:
        self.calls.append(job.config)
        loss = self.loss(job.config)
        result = {"val_loss": loss, "tokens": 2048, "batch_stream_hash": f"seed{job.config['train']['seed']}",
                  "train_seconds": 0.01, "tokens_per_s": 1000.0 + job.config["train"]["lr"]}
        curve = ({"step": 8, "tokens": 2048, "val_loss": loss},)
        return Outcome(run_id=job.run_id, status="completed", result=result, curve=curve, wall_seconds=0.01)


def _spec(tmp_path, corpus, verify: str, name: str):
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(corpus=corpus, verify=verify))
    return path


def _study(tmp_path, corpus, verify: str, name: str, jobs: FakeJobs):
    path = _spec(tmp_path, corpus, verify, name)
    report = run_study(path, study_dir=tmp_path / name, job_fn=jobs)
    with Store.open(tmp_path / name) as store:
        return path, report, store.runs(), {r.run_id: r for r in store.results()}, summarize(store)


def _outcomes(runs, results) -> dict:
    return {r.run_id: (r.status, results[r.run_id].val_loss if r.run_id in results else None) for r in runs}


@pytest.fixture
def adapted(tmp_path, tiny_corpus):
    return _study(tmp_path, tiny_corpus, 'verify = "adapt"\nadapt_trials = 3', "adapt", FakeJobs())


def test_adapt_retunes_every_large_shape(adapted, tmp_path, tiny_corpus):
    path, report, stored, results, summary = adapted
    assert report.failed == 0
    runs, checks = split_runs(stored)
    retune = [r for r in checks if is_adapt(r)]
    large = sorted({r.shape_label for r in runs if r.group == "large"})
    assert len(large) == 3
    # every large shape re-tuned, within 3 extra LRs each, with both seeds; the small scale untouched
    assert {(r.group, r.shape_label) for r in retune} == {("large", label) for label in large}
    assert adapt_trial_counts(checks) == {"large": {label: (3, 3) for label in large}}
    assert {r.seed for r in retune} == {0, 1}
    assert all(r.config["verify"]["adapt"] == 3 and r.config["verify"]["of_lr"] == PROXY_LR
               and "horizons" not in r.config["train"] for r in retune)
    # the checked shapes (shallowest, deepest) go on from their verification LRs, the middle one first steps
    # where the check found better (x sqrt(10)); all close in on the large scale's optimum, 0.04
    lrs = {label: sorted({r.lr for r in retune if r.shape_label == label}) for label in large}
    middle = next(label for label in large if label.startswith("L2-"))
    assert lrs[middle] == [0.0316228, 0.04, 0.1]
    assert all(lrs[label] == [0.04, 0.06325, 0.1] for label in large if label != middle)
    rows = {(r.group, r.shape_label): r for r in summary.rows}
    transferred = 3.0 + math.log(4.0) ** 2  # seed 0 at the transferred LR, 4x below the optimum
    for label in large:
        row = rows[("large", label)]
        assert row.lr_adapted and row.lr_transferred == PROXY_LR and row.best_lr == 0.04
        assert row.seed_losses == pytest.approx((3.0, 3.01)) and row.val_loss == pytest.approx(3.005)
        assert row.transferred_losses == pytest.approx((transferred, transferred + 0.01))
        assert row.transferred_loss == pytest.approx(transferred + 0.005)
        ids = {r.run_id for r in retune if r.shape_label == label and r.lr == 0.04}
        assert set(row.best_run_ids) == ids and len(ids) == 2
        assert row.best_lr in row.lr_losses and PROXY_LR in row.lr_losses and row.lr_bracketed
        assert row.lr_mode == "transfer" and row.lr_transfer_from == "L1-H40-A5"
    # the transfer check itself still reads against the transferred LR
    assert "the optimum moved: LR 0.0316 (higher)" in rows[("large", large[0])].lr_verify_note
    assert rows[("large", middle)].lr_verify == {}
    for label in ("L1-H40-A5", "L2-H32-A4"):  # the small scale: as transferred, not re-tuned
        row = rows[("small", label)]
        assert (row.lr_adapted, row.lr_transferred, row.transferred_losses, row.best_lr) == (False, None, (), PROXY_LR)
    notes = [w for w in summary.warnings if "re-tuned per shape" in w]
    assert notes == ["large: the transferred LR 0.01 was re-tuned per shape (3 extra trials each): " + ", ".join(
        f"{label} 0.04 (loss 3.005 vs {transferred + 0.005:.3f} transferred)"
        for label in [r.shape_label for r in summary.rows if r.group == "large"])]
    # more trials than the small scale's shapes, the same within the re-tuned group: fair
    assert summary.fairness.fair and check_fairness(stored, results, modes=stored_modes(load_spec(path), runs)).fair


def test_results_and_table_carry_the_transferred_values(adapted):
    from types import SimpleNamespace

    from depthwidth.report.study_tables import comparison
    from depthwidth.study.summary import ShapeResult

    *_, summary = adapted
    row = next(r for r in summary.rows if r.lr_adapted)
    data = row.to_dict()
    assert data["lr_adapted"] is True and data["lr_transferred"] == PROXY_LR
    assert data["transferred_loss"] == pytest.approx(row.transferred_loss)
    back = ShapeResult.from_dict(data)
    assert (back.lr_transferred, back.transferred_losses, back.best_lr) == (PROXY_LR, row.transferred_losses, 0.04)
    table = comparison(SimpleNamespace(results=summary.rows, baselines=None), targets={}, hardware="cpu")
    keys = [c.key for c in table.columns]
    assert keys.index("lr_transferred") == keys.index("n_seeds") + 1 and "transferred_loss" in keys
    titles = {c.key: c.title for c in table.columns}
    assert (titles["lr_transferred"], titles["transferred_loss"]) == ("transferred LR", "transferred loss")
    cells = {(r["group"], r["shape"]): r for r in table.rows}
    big = cells[(row.group, row.shape_label)]
    assert table.text(big, "best_lr") == "0.04" and table.text(big, "lr_transferred") == "0.01"
    assert table.text(big, "transferred_loss") == f"{row.transferred_loss:.4f}"
    small = cells[("small", "L2-H32-A4")]
    assert table.text(small, "lr_transferred") == "-" and table.text(small, "transferred_loss") == "-"
    plain = comparison(SimpleNamespace(results=tuple(r for r in summary.rows if not r.lr_adapted), baselines=None),
                       targets={}, hardware="cpu")
    assert "lr_transferred" not in [c.key for c in plain.columns]  # a study without a re-tune: the table as before


def test_adapt_first_trains_the_runs_of_verify_2(adapted, tmp_path, tiny_corpus):
    _, _, stored, _, _ = adapted
    _, _, two, _, two_summary = _study(tmp_path, tiny_corpus, "verify = 2", "two", FakeJobs())
    assert {r.run_id for r in stored if not is_adapt(r)} == {r.run_id for r in two}
    assert not any(r.lr_adapted for r in two_summary.rows)
    assert not any("re-tuned" in w for w in two_summary.warnings)


def test_the_plan_is_a_function_of_the_stored_outcomes(adapted, tmp_path):
    path, _, stored, results, _ = adapted
    expansion = expand(load_spec(path))
    outcomes = _outcomes(stored, results)
    assert {r.run_id for r in plan_runs(expansion, outcomes)} == set(outcomes)
    # killed once every verification run had finished, none of the re-tune: the first re-tuning LR of each shape,
    # and the same runs when asked again (a resumed study)
    before = {i: o for i, o in outcomes.items() if not is_adapt(next(r for r in stored if r.run_id == i))}
    first = [r for r in plan_runs(expansion, before) if is_verify(r) and is_adapt(r)]
    assert sorted({(r.shape.label(), r.lr) for r in first}) == [
        ("L1-H72-A9", 0.1), ("L2-H48-A6", 0.0316228), ("L3-H40-A5", 0.1)]
    assert len(first) == 6  # both seeds
    assert [r.run_id for r in plan_runs(expand(load_spec(path)), before) if is_adapt(r)] == [r.run_id for r in first]
    # one verification run unfinished: the check waits, nothing is re-tuned
    waiting = dict(before)
    waiting.pop(next(r.run_id for r in stored if is_verify(r) and not is_adapt(r)))
    assert not any(is_adapt(r) for r in plan_runs(expansion, waiting))
    # resumed with every run stored: nothing is trained again
    again = FakeJobs()
    report = run_study(path, study_dir=tmp_path / "adapt", job_fn=again)
    assert again.calls == [] and report.new == 0


def test_a_transfer_that_holds_adds_no_run(tmp_path, tiny_corpus):
    jobs = FakeJobs(moved=1.0)
    _, _, stored, _, summary = _study(tmp_path, tiny_corpus, 'verify = "adapt"', "holds", jobs)
    _, _, two, _, _ = _study(tmp_path, tiny_corpus, "verify = 2", "two", FakeJobs(moved=1.0))
    assert not any(is_adapt(r) for r in stored) and {r.run_id for r in stored} == {r.run_id for r in two}
    assert not any(r.lr_adapted for r in summary.rows) and summary.fairness.fair
    assert all("is the best of those tried" in r.lr_verify_note for r in summary.rows if r.lr_verify_note)


def test_check_transfer_is_typed_and_keeps_the_words():
    moved = check_transfer(0.01, [3.0, 3.02], {0.02: [2.90, 2.92], 0.005: [3.1, 3.1]})
    assert (moved.state, moved.moved, moved.best_lr, moved.direction) == ("moved", True, 0.02, "higher")
    assert moved.gain == pytest.approx(0.1) and moved.se == pytest.approx(0.01414, abs=1e-5)
    assert moved.words().startswith("the optimum moved: LR 0.02 (higher) is 0.100")
    noise = check_transfer(0.01, [3.0, 3.02], {0.005: [2.99, 3.01]})
    assert (noise.state, noise.moved, noise.direction) == ("noise", False, "lower")
    assert check_transfer(0.01, [3.0], {0.02: [2.9]}).state == "unresolved"  # one seed: never "moved"
    assert check_transfer(0.01, [3.0], {0.02: [None]}).state == "unfinished"
    assert check_transfer(0.01, [3.0, 3.0], {0.02: [3.1, 3.1]}).state == "best"
