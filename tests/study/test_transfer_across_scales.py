"""`[lr] transfer_from` naming a shape of another budget group: one small proxy is tuned once and every
shape of every scale trains at its best learning rate (CompleteP's claim of transfer across width and depth,
Dey et al. 2025); selection, the planner and the fairness check read it from the stored runs alone."""

from __future__ import annotations

import math

from depthwidth.study import Store, run_study, summarize
from depthwidth.study.expand import expand
from depthwidth.study.fairness import check_fairness
from depthwidth.study.lr_plan import plan_runs, stored_modes
from depthwidth.study.selection import select_lrs
from depthwidth.study.spec import load_spec
from depthwidth.study.verify import split_runs

SPEC = """
name = "lad"
seeds = [0]
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
depths = [1, 3]
tolerance = 0.3
[train]
steps = 8
parametrization = "completep"
base_width = 40
base_depth = 1
[lr]
grid = [0.003, 0.01, 0.03]
transfer_from = "L1-H40-A5"
transfer_seeds = 1
[eval]
every = 4
windows = 2
[bench]
enabled = false
[execution]
threads = 1
"""


def test_one_proxy_tunes_every_scale(tiny_corpus, tmp_path):
    """... with `[lr] verify = 2` (`depthwidth.study.verify`), whose extra runs change nothing of the above:
    the ids, selection and fairness of every other run are those of the same study without verify."""
    path = tmp_path / "lad.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus).replace("transfer_seeds = 1\n", "transfer_seeds = 1\nverify = 2\n"))
    plain = tmp_path / "plain.toml"
    plain.write_text(SPEC.format(corpus=tiny_corpus))
    expansion = expand(load_spec(path))
    assert expansion.modes["large"].proxy_group == "small" and expansion.modes["large"].proxy == "L1-H40-A5"
    assert {r.group for r in expansion.train_runs} == {"small"}  # only the proxy's grid to start with
    report = run_study(path, study_dir=tmp_path / "s")
    # 3 proxy trials, then 2 + 2 shapes less the proxy's own, and 2 x 2 verification runs at the large scale
    assert report.failed == 0 and report.completed == 3 + 3 + 4
    with Store.open(tmp_path / "s") as store:
        spec, stored, results = store.spec(), store.runs(), {r.run_id: r for r in store.results()}
        summary = summarize(store)
    runs, checks = split_runs(stored)
    outcomes = {r.run_id: ("completed", results[r.run_id].val_loss) for r in runs}
    assert {r.run_id for r in plan_runs(expand(load_spec(plain)), outcomes)} == set(outcomes)
    modes = stored_modes(spec, runs)
    assert modes["large"].proxy_group == "small"
    choices = {(c.group, c.shape_label): c for c in select_lrs(runs, results, modes=modes, lr=spec.lr)}
    best = choices[("small", "L1-H40-A5")].best_lr
    assert best in (0.003, 0.01, 0.03)
    large = [r for r in runs if r.group == "large"]
    assert {r.lr for r in large} == {best} and {r.shape_label for r in large} == {"L3-H40-A5", "L1-H72-A9"}
    for label in ("L3-H40-A5", "L1-H72-A9"):
        c = choices[("large", label)]
        assert c.mode == "transfer" and c.transfer_from == "L1-H40-A5" and c.best_lr == best
        proxy = choices[("small", "L1-H40-A5")]
        assert c.warning == (None if proxy.bracketed else
                             "its learning rate comes from L1-H40-A5, whose optimum was not bracketed")
    assert check_fairness(runs, results, modes=modes).fair
    # the stored runs with the checks among them: selection and fairness leave the checks out themselves
    assert select_lrs(stored, results, modes=modes, lr=spec.lr) == tuple(choices.values())
    assert check_fairness(stored, results, modes=modes).fair and summary.fair
    step = math.sqrt(10)  # the grid's mean ratio: 0.003, 0.01, 0.03
    want = sorted(float(f"{best * f:.6g}") for f in (1 / step, step))
    assert sorted({r.lr for r in checks}) == want
    assert {(r.group, r.shape_label) for r in checks} == {("large", "L3-H40-A5"), ("large", "L1-H72-A9")}
    assert all(r.seed == 0 and r.config["verify"]["of_lr"] == best and "horizons" not in r.config["train"]
               for r in checks)
    rows = {(r.group, r.shape_label): r for r in summary.rows}
    for label in ("L3-H40-A5", "L1-H72-A9"):
        row = rows[("large", label)]
        assert row.best_lr == best and row.lr_losses == {best: row.val_loss}  # the selection is the transferred LR
        assert row.lr_verify == {r.lr: results[r.run_id].val_loss for r in checks if r.shape_label == label}
        assert f"{best:.3g}" in row.lr_verify_note
    assert rows[("small", "L1-H40-A5")].lr_verify == {}
    assert sum("transfer check" in w for w in summary.warnings) == 2
