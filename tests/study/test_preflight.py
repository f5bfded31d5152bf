"""A spec that `study validate` accepts trains: every check the trainer makes of a run's shape and settings
alone is made on each run of the expansion (`study/preflight.py`), and a refusal is one line naming the
spec's file, line and key, before a study folder exists. An equal-time budget too short for [train] is
blamed on its own `seconds`, not on the [train] key it collides with."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.study import run_study
from depthwidth.study.expand import expand
from depthwidth.study.schema import SpecError
from depthwidth.study.spec import parse_spec

SPEC = """\
name = "pre"
hardware = "h100"
seeds = [0]
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = {batch}
{model}
[[shape]]
n_layers = 2
d_model = {width}
n_heads = {heads}
[train]
steps = 16
warmup = 2
schedule = "wsd"
decay_fraction = 0.25
{train}
[lr]
grid = [3e-3]
[eval]
windows = 2
[bench]
enabled = false
[execution]
threads = 1
{execution}
"""


def text(corpus, *, batch=4, width=32, heads=2, model="", train="", execution="") -> str:
    return SPEC.format(corpus=corpus, batch=batch, width=width, heads=heads, model=model, train=train,
                       execution=execution)


def line_of(spec_text: str, needle: str) -> int:
    return next(i for i, line in enumerate(spec_text.splitlines(), start=1) if line.startswith(needle))


@pytest.mark.parametrize("case, settings, key, words", [
    ("horizons over two processes", {"train": "horizons = [0.5, 1.0]", "execution": "nproc_per_run = 2"},
     "execution.nproc_per_run", "cooldown branches are trained in one process only"),
    ("a micro-batch the ranks do not divide", {"batch": 3, "execution": "nproc_per_run = 2"},
     "execution.nproc_per_run", "micro_batch=3"),
    ("tensor parallelism over heads it does not divide",
     {"width": 48, "heads": 3, "execution": 'nproc_per_run = 2\ntp = 2\nparallel = "fsdp"'},
     "execution.tp", "tp=2 must divide the shape's n_heads=3"),
    ("tensor parallelism under DDP", {"execution": "nproc_per_run = 4\ntp = 2"},
     "execution.tp", "needs parallel='fsdp'"),
    ("depth scaling of post-norm blocks", {"model": '[model]\nnorm_position = "post"',
                                           "train": 'parametrization = "completep"'},
     "train.parametrization", "scales pre-norm residual branches"),
])
def test_what_the_trainer_refuses_is_refused_by_validate_naming_the_key(tiny_corpus, tmp_path, case, settings,
                                                                         key, words):
    spec_text = text(tiny_corpus, **settings)
    with pytest.raises(SpecError) as err:
        expand(parse_spec(spec_text, source="pre.toml"))
    message = str(err.value)
    assert message.startswith(f"pre.toml:{line_of(spec_text, key.split('.')[1])}: {key}: the run L2-H"), message
    assert words in message and "\n" not in message, message
    # `study run` refuses it the same way before the folder is touched
    path = tmp_path / "pre.toml"
    path.write_text(spec_text)
    with pytest.raises(SpecError) as err:
        run_study(path, study_dir=tmp_path / "study")
    assert words in str(err.value) and not (tmp_path / "study").exists()


def test_the_same_settings_in_one_process_are_valid(tiny_corpus):
    expansion = expand(parse_spec(text(tiny_corpus, train="horizons = [0.5, 1.0]")))
    assert [r.horizon for r in expansion.train_runs] == [None, 0.5]
    expand(parse_spec(text(tiny_corpus, batch=4, execution="nproc_per_run = 2")))  # 4 over 2 ranks


def test_a_plain_spec_is_validated_without_torch(tiny_corpus, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "plain.toml"
    path.write_text(text(tiny_corpus, train="horizons = [0.5, 1.0]"))
    code = ("import sys; from depthwidth.study import prepare; prepare(sys.argv[1]); "
            "assert 'torch' not in sys.modules, 'validate imported torch'")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


TIME_SPEC = """\
name = "time"
hardware = "h100"
seeds = [0]
[data]
corpus = "{corpus}"
seq_len = 32
batch_size = 4
[[budget]]
params = 20000
depths = [2, 1]
{time}
[train]
tokens = 10000
warmup = 4
[lr]
grid = [1e-3]
[eval]
windows = 2
[bench]
enabled = false
"""


@pytest.mark.parametrize("time, key, words", [
    ("seconds = 1e-4", "seconds", "seconds=0.0001 is less than one training step of L"),
    ("gpu_hours = 1e-9", "gpu_hours", "gpu_hours=1e-09 is less than one training step of L"),
    ("seconds = 6e-4", "seconds", "too few for train.warmup: warmup=4 must be fewer than the 2 training steps"),
])
def test_a_time_budget_too_short_for_its_runs_names_its_own_line(tiny_corpus, time, key, words):
    spec_text = TIME_SPEC.format(corpus=tiny_corpus, time=time)
    with pytest.raises(UserError) as err:
        expand(parse_spec(spec_text, source="time.toml"))
    message = str(err.value)
    assert message.startswith(f"time.toml:{line_of(spec_text, key)}: budget[0].{key}: "), message
    assert words in message and "ms per step predicted on table h100" in message and "\n" not in message, message


def test_a_time_budget_long_enough_is_valid(tiny_corpus):
    (group,) = expand(parse_spec(TIME_SPEC.format(corpus=tiny_corpus, time="seconds = 0.05"))).groups
    assert min(share.steps for share in group.shares.values()) > 4


@pytest.mark.parametrize("extra, words", [
    ("depths = [2, 1]\nwidths = [32]", "give depths or widths, not both"),
    ("aspect_min = 600.0", "aspect_min=600 must be below aspect_max=512"),
])
def test_a_budget_s_own_contradictions_are_its_own_errors(tiny_corpus, extra, words):
    spec_text = TIME_SPEC.format(corpus=tiny_corpus, time="seconds = 0.05").replace("depths = [2, 1]\n", extra + "\n")
    with pytest.raises(UserError) as err:
        parse_spec(spec_text, source="time.toml")
    assert "budget[0]" in str(err.value) and words in str(err.value)
