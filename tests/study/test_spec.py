"""Spec validation: every bad spec is refused before anything runs, naming the file, the line, the key
path and what was expected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from depthwidth.study import SpecError, load_spec, parse_spec
from depthwidth.study.demo import demo_spec

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
name = "ok"

[data]
seq_len = 32
batch_size = 4

[train]
tokens = 10000

[lr]
grid = [1e-3, 3e-3]

[[shape]]
n_layers = 2
d_model = 32
n_heads = 2
"""


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="s.toml")
    return info.value


def test_good_spec_parses_with_defaults():
    spec = parse_spec(GOOD, source="s.toml")
    assert spec.name == "ok" and spec.seeds == (0,) and spec.train.tokens == 10000
    assert spec.lr.values(32) == (1e-3, 3e-3) and spec.lr.trials == 2
    assert spec.shapes[0].n_layers == 2 and spec.budgets == ()


def test_unknown_top_level_key_names_line():
    err = error_of(GOOD.replace('name = "ok"', 'name = "ok"\ncolour = "blue"'))
    assert (err.source, err.line, err.key) == ("s.toml", 2, "colour")
    assert str(err).startswith("s.toml:2: colour: unknown key 'colour'; expected one of name,")


def test_unknown_nested_key_names_path_and_line():
    err = error_of(GOOD.replace("tokens = 10000", "tokens = 10000\nlearning_rate = 0.1"))
    assert err.key == "train.learning_rate" and err.line == 9
    assert "expected one of" in err.message and "warmup" in err.message


def test_wrong_type_says_what_was_expected():
    err = error_of(GOOD.replace("tokens = 10000", 'tokens = "many"'))
    assert err.key == "train.tokens" and err.line == 8
    assert err.message == "tokens='many' must be a positive integer"


def test_key_in_second_array_table_is_located():
    text = GOOD + '\n[[budget]]\nparams = 500_000\n\n[[budget]]\nparams = 900_000\ncount = "five"\n'
    err = error_of(text)
    assert err.key == "budget[1].count"
    assert text.splitlines()[err.line - 1] == 'count = "five"'


def test_missing_name_and_bad_toml():
    assert error_of(GOOD.replace('name = "ok"\n', "")).key == "name"
    err = error_of(GOOD.replace("tokens = 10000", "tokens = = 3"))
    assert "not valid TOML" in err.message and "line 8" in err.message


@pytest.mark.parametrize("change, key, words", [
    (("tokens = 10000", "tokens = 100"), "train.tokens", "less than one batch (batch_size * seq_len = 128)"),
    (("tokens = 10000", "tokens = 10000\nsteps = 3"), "train",
     "give one training budget: tokens, tokens_per_param or steps (got tokens, steps)"),
    (("grid = [1e-3, 3e-3]", "grid = [1e-3, 1e-3]"), "lr.grid", "distinct"),
    (("grid = [1e-3, 3e-3]", "centre = 1e-3"), "lr", "reference_width"),
    (("grid = [1e-3, 3e-3]", "grid = [-1.0]"), "lr.grid", "item 0: expected a number > 0"),
    (('name = "ok"', 'name = "ok"\nhardware = "h900"'), "hardware", "unknown hardware 'h900'"),
    (('name = "ok"', 'name = "ok"\nseeds = [0, 0]'), "seeds", "distinct"),
    (("[data]", "[model]\nmax_seq_len = 16\n\n[data]"), "model.max_seq_len",
     "data.seq_len=32 exceeds the position table (16)"),
    (("[lr]", "[bench]\ncontexts = [32]\n\n[lr]"), "bench.contexts", "32 + 1 (the decoded token) exceeds"),
])
def test_rejections(change, key, words):
    err = error_of(GOOD.replace(*change))
    assert err.key == key
    assert words in err.message


@pytest.mark.parametrize("key,value,home", [("nproc", "2", "nproc_per_run"), ("parallel", '"fsdp"', "parallel"),
                                            ("tp", "2", "tp")])
def test_execution_fields_have_one_home(key, value, home):
    # how a run spreads over processes is an [execution] key; in [train] it is one line saying where it goes
    text = GOOD.replace("tokens = 10000", f"tokens = 10000\n{key} = {value}")
    err = error_of(text)
    assert str(err) == (f"s.toml:{text.splitlines().index(f'{key} = {value}') + 1}: train.{key}: {key} is set by "
                        f"execution.{home} in a study spec, not in [train]: put it under [execution]"
                        + (f" as {home}" if home != key else ""))
    moved = parse_spec(GOOD + f"\n[execution]\n{home} = {value}\n", source="s.toml")
    assert getattr(moved.execution, home) == (int(value) if value.isdigit() else value.strip('"'))


def test_impossible_budget_is_rejected_before_running(tiny_corpus):
    from depthwidth.study import expand

    text = GOOD.replace("[[shape]]\nn_layers = 2\nd_model = 32\nn_heads = 2\n", "[[budget]]\nparams = 50\n")
    text = text.replace("[data]", f'[data]\ncorpus = "{tiny_corpus}"')
    spec = parse_spec(text, source="s.toml")
    with pytest.raises(SpecError) as info:
        expand(spec)
    err = info.value
    assert err.key == "budget[0]" and err.line == text.splitlines().index("[[budget]]") + 1
    assert "no shape is within 5% of 50 non-embedding parameters" in err.message


def test_missing_corpus_is_a_spec_error():
    from depthwidth.study import expand

    spec = parse_spec(GOOD.replace("[data]", '[data]\ncorpus = "/nonexistent/file.txt"'), source="s.toml")
    with pytest.raises(SpecError, match=r"s.toml:4: data.corpus: data file /nonexistent/file.txt does not exist"):
        expand(spec)


def test_cli_rejects_bad_spec_in_one_line_and_creates_nothing(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("batch_size = 4", "batch_size = 4\nbatchsize = 8"))
    study = tmp_path / "study"
    proc = subprocess.run([sys.executable, "-m", "depthwidth", "study", "run", str(bad), "--dir", str(study)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"depthwidth study: error: {bad}:6: data.batchsize: unknown key 'batchsize'; expected one of "
        "batch_size, corpus, seq_len, tokenizer, val_fraction"]
    assert not study.exists()


def test_examples_are_valid():
    files = sorted((ROOT / "examples").glob("*.toml"))
    assert len(files) >= 3
    for f in files:
        spec = load_spec(f)
        assert spec.name and spec.lr.trials >= 2


def test_demo_is_a_ladder_of_three_scales_with_one_transferred_and_verified_lr():
    from depthwidth.report.trends import family_of
    from depthwidth.shapes.params import count_params
    from depthwidth.study import expand
    from depthwidth.study.expand import DataInfo

    spec = demo_spec()
    assert spec.data.corpus == "shakespeare" and spec.data.tokenizer == "byte" and spec.seeds == (0, 1)
    assert not spec.model.tie_embeddings
    expansion = expand(spec, data=DataInfo(corpus_hash="x", vocab_size=256, train_tokens=10**6))
    groups = {g.label: g for g in expansion.groups}
    assert set(groups) == {f"{g}{h}" for g in ("N25K", "N50K", "N100K") for h in ("", "@0.5", "@0.75")}
    families = []
    for label, target in (("N25K", 25_000), ("N50K", 50_000), ("N100K", 100_000)):
        shapes = groups[label].shapes
        assert len(shapes) == 4 and max(s.n_layers for s in shapes) >= 4 * min(s.n_layers for s in shapes)
        for s in shapes:
            assert abs(count_params(s).non_embedding / target - 1) <= 0.17
        families.append({family_of(s.aspect_ratio) for s in shapes})
        mode = expansion.modes[label]
        assert mode.kind == "transfer" and mode.proxy == "L2-H32-A4"
        assert mode.proxy_group == (None if label == "N25K" else "N25K")
    # the deep-narrow and the middle families recur at every scale: their trends have three scales
    assert {"d/L~8", "d/L~16"} <= families[0] & families[1] & families[2]
    # every run is 400 optimizer steps: past the bigram baseline, with horizons at 200 and 300 steps
    tokens_per_step = spec.data.seq_len * spec.data.batch_size
    assert {groups[g].tokens // tokens_per_step for g in ("N25K", "N50K", "N100K")} == {400}
    # to start: the proxy's two starting LRs x 2 seeds, each with 2 branches
    assert len([r for r in expansion.train_runs if r.parent is None]) == 4
    assert len([r for r in expansion.train_runs if r.parent is not None]) == 2 * 4
    assert spec.lr.verify == "adapt" and spec.lr.extra_trials == 2  # checked at N100K, re-tuned if it moved
    assert spec.report.min_tokens_per_param == 3.0 and spec.report.min_scales == 3


def _transfer(extra: str) -> str:
    """GOOD under CompleteP with its shape as the LR proxy, plus `extra` lines in [lr]."""
    return (GOOD.replace("tokens = 10000", 'tokens = 10000\nparametrization = "completep"')
            .replace("grid = [1e-3, 3e-3]", f'grid = [1e-3, 3e-3]\ntransfer_from = "L2-H32-A2"\n{extra}'))


def test_verify_adapt_parses_with_its_trial_budget():
    lr = parse_spec(_transfer('verify = "adapt"'), source="s.toml").lr
    assert (lr.verify, lr.adapts, lr.verify_count, lr.adapt_trials, lr.extra_trials) == ("adapt", True, 2, None, 3)
    lr = parse_spec(_transfer('verify = "adapt"\nadapt_trials = 5'), source="s.toml").lr
    assert (lr.adapt_trials, lr.extra_trials) == (5, 5)
    for count in (0, 2, 4):  # the numbers keep their meaning
        lr = parse_spec(_transfer(f"verify = {count}"), source="s.toml").lr
        assert (lr.verify, lr.adapts, lr.verify_count, lr.extra_trials) == (count, False, count, 0)


@pytest.mark.parametrize("extra, key, words", [
    ('verify = "maybe"', "lr.verify", "expected 0, 2, 4 or 'adapt', got 'maybe' (string)"),
    ("verify = 6", "lr.verify", "expected 0, 2, 4 or 'adapt', got 6 (integer)"),
    ("verify = true", "lr.verify", "expected 0, 2, 4 or 'adapt', got True (boolean)"),
    ("verify = 2.0", "lr.verify", "expected 0, 2, 4 or 'adapt', got 2.0 (number)"),
    ("verify = 3", "lr.verify", "verify=3: give 0, 2 or 4 (learning rates below and above the transferred one in "
                                "equal numbers), or 'adapt'"),
    ("verify = 2\nadapt_trials = 3", "lr.adapt_trials", "adapt_trials is a setting of verify = 'adapt'"),
    ('verify = "adapt"\nadapt_trials = 0', "lr.adapt_trials", "expected an integer in [1, 16]"),
    ('verify = "adapt"\nadapt_trials = 17', "lr.adapt_trials", "expected an integer in [1, 16] (extra learning rates"),
    ('verify = "adapt"\nadapt_trials = "3"', "lr.adapt_trials", "expected an integer >= 1, got '3' (string)"),
])
def test_verify_and_adapt_trials_rejections(extra, key, words):
    text = _transfer(extra)
    err = error_of(text)
    assert err.key == key and words in err.message
    assert text.splitlines()[err.line - 1].startswith(key.split(".")[1])  # the line of the key itself


def test_verify_adapt_needs_a_transfer():
    err = error_of(GOOD.replace("grid = [1e-3, 3e-3]", 'grid = [1e-3, 3e-3]\nverify = "adapt"'))
    assert err.key == "lr.verify" and "it needs transfer_from" in err.message
