"""`compile = "auto"`: the break-even rule from stored figures, a shape's own record before the reference,
the decision in the result, the record a compiled run leaves, the flag and the config value. The runs use
torch.compile's aot_eager backend (the same graphs, no code generation: seconds on 2 cores)."""

from __future__ import annotations

import json

import pytest

from depthwidth.cli import build_parser
from depthwidth.cli.train import config_from_args
from depthwidth.errors import UserError
from depthwidth.shapes import Shape
from depthwidth.shapes.flops import flops
from depthwidth.train import TrainConfig, speed, train
from depthwidth.train import compile_auto as ca


def _write(cache, *, reference=None, shapes=None, threads=1):
    path = cache / ca.FILE
    cache.mkdir(parents=True, exist_ok=True)
    data = {ca._key(threads): {"reference": reference or {}, "shapes": shapes or {}}}
    path.write_text(json.dumps(data))
    return path


def _reference(eager_l3=0.09, speedup=1.25, compile_s=(20.0, 24.0)):
    rows = []
    for depth, cost in zip(ca.REF_DEPTHS, compile_s):
        shape = Shape(n_layers=depth, d_model=ca.REF_WIDTH, n_heads=4, vocab_size=256, max_seq_len=ca.REF_SEQ,
                      bias="all")
        per_step = flops(shape, seq_len=ca.REF_SEQ).train_per_token * ca.REF_SEQ * ca.REF_BATCH
        eager = eager_l3 * depth / ca.REF_DEPTHS[-1]
        rows.append({"n_layers": depth, "eager_step_s": eager, "compiled_step_s": eager / speedup,
                     "compile_s": cost, "flops_per_step": per_step})
    return {"fp32": {"rows": rows, "backend": "inductor", "measured": "x"}}


def test_the_break_even_from_the_reference(tmp_path):
    _write(tmp_path, reference=_reference())
    shape = Shape(n_layers=5, d_model=128, n_heads=4, vocab_size=256, max_seq_len=128, bias="all")
    d = ca.decide(shape, steps=1000, seq_len=128, batch=16, dtype="fp32", threads=1, cache=tmp_path)
    ref = _reference()["fp32"]["rows"][-1]
    eager = flops(shape, seq_len=128).train_per_token * 128 * 16 * ref["eager_step_s"] / ref["flops_per_step"]
    assert d.eager_step_s == pytest.approx(eager) and d.compiled_step_s == pytest.approx(eager / 1.25)
    assert d.compile_s == pytest.approx(20.0 + 2.0 * (5 - 1))  # the line through (1, 20 s) and (3, 24 s)
    assert d.break_even_steps == pytest.approx(28.0 / (eager - eager / 1.25))
    assert d.compile is (1000 > d.break_even_steps) and d.source == "reference"
    many = ca.decide(shape, steps=10**6, seq_len=128, batch=16, dtype="fp32", threads=1, cache=tmp_path)
    assert many.compile and many.reason.startswith("compiled: 1000000 steps, past the break-even")


def test_no_speed_up_never_compiles(tmp_path):
    _write(tmp_path, reference=_reference(speedup=0.9))
    shape = Shape(n_layers=2, d_model=64, n_heads=2, vocab_size=256, max_seq_len=64)
    d = ca.decide(shape, steps=10**7, seq_len=64, batch=8, dtype="fp32", threads=1, cache=tmp_path)
    assert not d.compile and d.break_even_steps is None and "does not speed" in d.reason


def test_the_shapes_own_record_comes_first(tmp_path, tiny_shape):
    _write(tmp_path, reference=_reference())
    ca.record(tiny_shape, seq_len=32, batch=4, dtype="fp32", threads=1, eager_step_s=0.010, compiled_step_s=0.006,
              compile_s=2.0, cache=tmp_path)
    d = ca.decide(tiny_shape, steps=400, seq_len=32, batch=4, dtype="fp32", threads=1, cache=tmp_path)
    assert d.source == "this shape's record" and d.break_even_steps == pytest.approx(500.0) and not d.compile
    assert ca.decide(tiny_shape, steps=600, seq_len=32, batch=4, dtype="fp32", threads=1, cache=tmp_path).compile
    other = ca.decide(tiny_shape, steps=600, seq_len=32, batch=8, dtype="fp32", threads=1, cache=tmp_path)
    assert other.source == "reference"  # another batch geometry is another record


def _record(cache, shape, compile_s):
    ca.record(shape, seq_len=32, batch=4, dtype="fp32", threads=1, eager_step_s=1.0, compiled_step_s=0.5,
              compile_s=compile_s, cache=cache)


def test_auto_compiles_where_it_pays_and_records_what_it_measured(tiny_shape, tiny_config, tmp_path, monkeypatch):
    monkeypatch.setattr(speed, "COMPILE_BACKEND", "aot_eager")
    cache = tmp_path / "cache"
    _record(cache, tiny_shape, compile_s=1.0)  # break-even 2 steps: 6 steps compile
    cfg = tiny_config.with_(steps=6)
    eager = train(tiny_shape, cfg)
    auto = train(tiny_shape, cfg.with_(compile="auto"))
    assert auto.compiled and auto.compile_auto["compile"] and auto.compile_auto["break_even_steps"] == 2.0
    assert auto.compile_auto["source"] == "this shape's record" and auto.config["compile"] == "auto"
    assert [c["loss"] for c in auto.curve] == pytest.approx([c["loss"] for c in eager.curve], rel=1e-5)
    assert auto.config_hash != eager.config_hash and "compile_auto" in auto.to_dict()
    assert "compile_auto" not in eager.to_dict() and eager.compile_auto is None
    kept = json.loads((cache / ca.FILE).read_text())[ca._key(1)]["shapes"]
    (row,) = kept.values()  # the run's own figures replaced the hand-written ones
    assert row["compile_s"] != 1.0 and row["compiled_step_s"] != 0.5 and row["eager_step_s"] == 1.0
    assert 0 < row["compiled_step_s"] < auto.curve[0]["seconds"]


def test_auto_stays_eager_where_compiling_does_not_pay(tiny_shape, tiny_config, tmp_path, monkeypatch):
    monkeypatch.setattr(speed, "COMPILE_BACKEND", "aot_eager")
    _record(tmp_path / "cache", tiny_shape, compile_s=100.0)  # break-even 200 steps
    cfg = tiny_config.with_(steps=6)
    eager = train(tiny_shape, cfg)
    auto = train(tiny_shape, cfg.with_(compile="auto"))
    assert not auto.compiled and auto.compile_auto["compile"] is False
    assert auto.compile_auto["reason"] == "eager: 6 steps, below the break-even 200"
    assert [c["loss"] for c in auto.curve] == [c["loss"] for c in eager.curve]  # eager: bit for bit
    assert auto.val_loss == eager.val_loss


def test_the_flag_and_the_value(corpus_file):
    parser = build_parser()

    def compile_of(*flags):
        args = parser.parse_args(["train", "--data", str(corpus_file), "--steps", "4", *flags])
        return config_from_args(args).compile

    assert compile_of("--compile", "auto") == "auto"
    assert compile_of("--compile") is True and compile_of("--no-compile") is False and compile_of() is None
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--steps", "4", "--compile", "sometimes"])
    with pytest.raises(UserError, match='compile=.sometimes. must be true, false or "auto"'):
        TrainConfig(corpus="shakespeare", steps=4, compile="sometimes")
