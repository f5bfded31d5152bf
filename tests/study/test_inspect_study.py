"""[inspect] in a study: the spec table, run ids that do not change with it, each finished shape inspected
once per settings (stored, skipped when stored, again when the settings change, a failed one stored with its
error and tried again), and the result per shape equal to `depthwidth inspect` of that run."""

from __future__ import annotations

import shutil

import pytest

from depthwidth.study import Store, expand, parse_spec, run_study, summarize
from depthwidth.study.expand import DataInfo
from depthwidth.study.jobs import Outcome, execute
from depthwidth.study.schema import SpecError

DATA = DataInfo(corpus_hash="c0ffee", vocab_size=256, train_tokens=10**6)


def in_process(job, progress=None) -> Outcome:
    """The real job, run in this process (a stand-in job function is not spawned: no worker start-up)."""
    return execute(job, progress=progress)


def test_the_inspect_table_is_checked_and_changes_no_run_id(tiny_spec):
    from depthwidth.study.demo import demo_spec_text

    text = tiny_spec.read_text()
    spec = parse_spec(text + "\n[inspect]\nwindows = 3\ntolerance = 0.05\n", source="s.toml")
    assert spec.inspect.settings() == {"windows": 3, "tolerance": 0.05} and spec.inspect.enabled
    assert parse_spec(text + "\n[inspect]\n").inspect.settings() == {"windows": 8, "tolerance": 0.01}
    assert parse_spec(text).inspect is None and "inspect" not in parse_spec(text).to_dict()
    for bad, key in (("windows = 0", "inspect.windows"), ("windows = 5000", "inspect.windows"),
                     ("tolerance = -1", "inspect.tolerance"), ("window = 2", "inspect.window")):
        with pytest.raises(SpecError, match=key.replace(".", r"\.")) as err:
            parse_spec(text + f"\n[inspect]\n{bad}\n", source="s.toml")
        assert len(str(err.value).splitlines()) == 1 and str(err.value).startswith("s.toml:")
    for base in (text, demo_spec_text().split("\n[inspect]")[0]):  # the demo's own table is its last
        plain = {r.run_id for r in expand(parse_spec(base), data=DATA).runs}
        inspected = {r.run_id for r in expand(parse_spec(base + "\n[inspect]\nwindows = 2\n"), data=DATA).runs}
        assert plain == inspected and plain


@pytest.fixture
def study(reference, tmp_path):
    folder = tmp_path / "study"
    shutil.copytree(reference.dir, folder)
    return folder


def _spec(reference, tmp_path, extra: str):
    path = tmp_path / "inspect.toml"
    path.write_text(reference.spec.read_text() + extra, encoding="utf-8")
    return path


def test_each_finished_shape_is_inspected_once_per_settings(reference, study, tmp_path):
    from depthwidth.diagnose.inspect import inspect_run
    from depthwidth.present.study import run_report_line
    from depthwidth.study.jobs import run_dir

    spec = _spec(reference, tmp_path, "\n[inspect]\nwindows = 4\n")
    first = run_study(spec, study_dir=study, job_fn=in_process)
    assert (first.skipped, first.new, first.completed, first.inspected) == (first.total, 0, 0, 2)
    assert run_report_line(first).endswith("already finished were reused; 2 shape(s) inspected")
    with Store.open(study) as store:
        stored = store.inspections()
        rows = summarize(store).rows
    assert [r.status for r in stored] == ["completed", "completed"]
    assert {r.settings["windows"] for r in stored} == {4}
    for row in rows:
        run_id = row.best_run_ids[0]
        direct = inspect_run(run_dir(study, run_id), windows=4).report
        assert row.inspection["run_id"] == run_id and row.effective_depth == direct.effective_depth
        assert row.inspection["drop_increase"] == pytest.approx(direct.drop_increase, abs=1e-9)
        assert row.inspect_tolerance == 0.01 and row.inspect_loss == pytest.approx(direct.loss, abs=1e-9)
        # [eval] windows = 4 too: the inspected loss is the run's own final validation loss
        assert row.inspect_loss == pytest.approx(row.seed_losses[0], abs=1e-5)
        drop = direct.drop_increase
        assert drop[row.most_important_block] == max(drop) and drop[row.least_important_block] == min(drop)
    assert {r.n_layers for r in rows} == {1, 4}
    again = run_study(spec, study_dir=study, job_fn=in_process)
    assert again.inspected == 0  # stored with these settings: not repeated
    looser = run_study(_spec(reference, tmp_path, "\n[inspect]\nwindows = 4\ntolerance = 10.0\n"), study_dir=study,
                       job_fn=in_process)
    assert looser.inspected == 2 and looser.completed == 0
    with Store.open(study) as store:
        rows = summarize(store).rows
    assert {r.inspect_tolerance for r in rows} == {10.0} and {r.effective_depth for r in rows} == {0}


def test_a_failed_inspection_is_stored_with_its_error_and_tried_again(reference, study, tmp_path):
    spec = _spec(reference, tmp_path, "\n[inspect]\nwindows = 2\n")

    def broken(job, progress=None) -> Outcome:
        assert job.kind == "inspect"  # every training run and bench is already finished
        return Outcome(run_id=job.run_id, status="failed", result=None, error="RuntimeError: no luck")

    report = run_study(spec, study_dir=study, job_fn=broken)
    assert report.inspected == 0 and report.failed == 0
    with Store.open(study) as store:
        assert [(r.status, r.error) for r in store.inspections()] == [("failed", "RuntimeError: no luck")] * 2
        summary = summarize(store)
    assert sum(w.startswith("inspect failed: ") and w.endswith("RuntimeError: no luck") for w in summary.warnings) == 2
    assert all(r.effective_depth is None for r in summary.rows)
    assert run_study(spec, study_dir=study, job_fn=in_process).inspected == 2
    with Store.open(study) as store:
        summary = summarize(store)
    assert not any(w.startswith("inspect failed") for w in summary.warnings)
    assert all(r.effective_depth is not None for r in summary.rows)
