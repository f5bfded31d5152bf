"""`[lr] transfer_from` naming a shape of another budget group: one small proxy is tuned once and every
shape of every scale trains at its best learning rate (CompleteP's claim of transfer across width and depth,
Dey et al. 2025); selection, the planner and the fairness check read it from the stored runs alone."""

from __future__ import annotations

from depthwidth.study import Store, run_study
from depthwidth.study.expand import expand
from depthwidth.study.fairness import check_fairness
from depthwidth.study.lr_plan import stored_modes
from depthwidth.study.selection import select_lrs
from depthwidth.study.spec import load_spec

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
    path = tmp_path / "lad.toml"
    path.write_text(SPEC.format(corpus=tiny_corpus))
    expansion = expand(load_spec(path))
    assert expansion.modes["large"].proxy_group == "small" and expansion.modes["large"].proxy == "L1-H40-A5"
    assert {r.group for r in expansion.train_runs} == {"small"}  # only the proxy's grid to start with
    report = run_study(path, study_dir=tmp_path / "s")
    assert report.failed == 0 and report.completed == 3 + 3  # 3 proxy trials, then 2 + 2 shapes less the proxy's own
    with Store.open(tmp_path / "s") as store:
        spec, runs, results = store.spec(), store.runs(), {r.run_id: r for r in store.results()}
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
