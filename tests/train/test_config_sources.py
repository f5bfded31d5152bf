"""`TrainConfig` is the one description of a run: every field can be set from the `train` CLI and
from a study spec, and both give back the same `TrainConfig`. The CLI flags and the spec's [train] keys
are derived from the dataclass fields, so a new field reaches both with no edit (this test then only
needs a sample value for it)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from depthwidth.cli import build_parser
from depthwidth.cli.train import config_from_args, flag
from depthwidth.study.expand import DataInfo, expand
from depthwidth.study.run_config import train_config_of
from depthwidth.study.schema import SpecError
from depthwidth.study.spec import PLACED, parse_spec
from depthwidth.study.spec_train import NOT_IN_STUDIES
from depthwidth.artifact.config import EXECUTION_FIELDS, TrainConfig

#: a value different from the default for every field (tokens sets the budget; steps stays None)
SAMPLE = dict(
    corpus="python-docs", tokenizer="char", val_fraction=0.2, test_fraction=0.05, seq_len=64, batch_size=8,
    micro_batch=4, cache_dir="/tmp/depthwidth-cache-x", init_from="/tmp/depthwidth-hf-model-x", steps=None, tokens=8 * 64 * 20, lr=2e-3, min_lr=3e-4,
    warmup=3, schedule="wsd", decay_fraction=0.3, decay_shape="linear", horizons=(0.5, 1.0), beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.05, decay_embeddings=True,
    grad_clip=0.5, adamw="foreach", dropout=0.1, dtype="bf16", device="cpu", threads=1, attn_impl="eager", seed=7, eval_every=5,
    eval_windows=3, checkpoint_every=10, diverge_factor=3.0, peak_flops=1e12,
    parametrization="completep", base_width=64, base_depth=2, deterministic=True, compile=True,
    allow_slow_dtype=True, nproc=2, parallel="fsdp", tp=2, reshard=False, cuda_dtype="fp32",
)
WANT = TrainConfig(**SAMPLE)
#: what a study spec can set: every field but those a study does not read yet (`NOT_IN_STUDIES`)
SPEC_SAMPLE = {k: v for k, v in SAMPLE.items() if k not in NOT_IN_STUDIES}
SPEC_WANT = TrainConfig(**SPEC_SAMPLE)


def test_the_sample_covers_every_field_with_a_non_default():
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert set(SAMPLE) == set(fields)
    assert [name for name, value in SAMPLE.items() if value == fields[name] and name != "steps"] == []


def _argv() -> list[str]:
    argv = []
    for name, value in SAMPLE.items():
        if value is None:
            continue
        argv += ([flag(name)] if value is True else ["--no-" + flag(name)[2:]] if value is False
                 else [flag(name), ",".join(map(str, value)) if isinstance(value, tuple) else str(value)])
    return argv


def test_every_field_from_the_train_cli():
    args = build_parser().parse_args(["train", "--shape", "L2-H32-A2", *_argv()])
    assert config_from_args(args) == WANT


def test_cli_defaults_are_the_dataclass_defaults():
    args = build_parser().parse_args(["train", "--shape", "L2-H32-A2", "--steps", "5"])
    assert config_from_args(args) == TrainConfig(steps=5)


def _toml(value) -> str:
    return "true" if value is True else "false" if value is False else json.dumps(value)


def _spec_text(sample: dict) -> str:
    where: dict[str, list[str]] = {"data": [], "eval": [], "train": [], "execution": []}
    for name, value in sample.items():
        if value is None or name in ("lr", "seed"):
            continue
        section, _, key = PLACED.get(name, f"train.{name}").partition(".")
        where[section].append(f"{key} = {_toml(value)}")
    body = "\n\n".join(f"[{section}]\n" + "\n".join(lines) for section, lines in where.items())
    return (f'name = "every-field"\nseeds = [{sample["seed"]}]\n\n{body}\n\n[lr]\ngrid = [{sample["lr"]}]\n\n'
            "[bench]\nenabled = false\n\n[[shape]]\nn_layers = 2\nd_model = 32\nn_heads = 2\n")


def test_every_field_from_a_study_spec(monkeypatch):
    # init_from names a model folder whose content hash is part of the run's identity
    monkeypatch.setattr("depthwidth.hfio.weights.content_hash", lambda path: f"hash of {path}")
    # the sample sets every field off its default, horizons and two processes together among them, which the
    # trainer refuses in one run (study/preflight.py refuses it at expansion: tests/study/test_preflight.py);
    # here only where each field comes from is checked
    import sys

    monkeypatch.setattr(sys.modules["depthwidth.study.expand"], "check_runs", lambda expansion: None)
    spec = parse_spec(_spec_text(SPEC_SAMPLE), source="every.toml")
    every = expand(spec, data=DataInfo(corpus_hash="c0ffee", vocab_size=256, train_tokens=10**6)).train_runs
    runs = [r for r in every if r.parent is None]  # the sample's horizons add the cooldown branches
    assert len(runs) == 1 and len(every) == len(SPEC_SAMPLE["horizons"])
    assert runs[0].config["init_hash"] == f"hash of {SPEC_SAMPLE['init_from']}"
    execution = {k: v for k, v in spec.execution_settings().items() if k in EXECUTION_FIELDS}
    assert train_config_of(runs[0].config, threads=spec.execution.threads, **execution) == SPEC_WANT
    # what the executor sets is not part of the run's identity
    assert not set(EXECUTION_FIELDS) & set(runs[0].config["train"])


def test_a_field_set_elsewhere_in_a_spec_is_refused_in_train():
    text = _spec_text(SPEC_SAMPLE).replace("[train]\n", "[train]\nseq_len = 32\n", 1)
    with pytest.raises(SpecError, match=r"train.seq_len: seq_len is set by data.seq_len"):
        parse_spec(text, source="every.toml")


def test_a_bad_value_in_train_names_its_key_and_line():
    text = _spec_text(SPEC_SAMPLE).replace("eps = 1e-06", "eps = -1.0")
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="every.toml")
    assert info.value.key == "train.eps" and "eps=-1.0 must be a finite number > 0" in str(info.value)
    assert text.splitlines()[info.value.line - 1] == "eps = -1.0"


def test_a_bad_flag_value_names_the_flag():
    from depthwidth.errors import UserError

    args = build_parser().parse_args(["train", "--shape", "L2-H32-A2", "--steps", "5", "--warmup", "9"])
    with pytest.raises(UserError, match=r"^--warmup: warmup=9 must be fewer than the 5 training steps$"):
        config_from_args(args)
