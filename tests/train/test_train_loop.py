import json
import math

import numpy as np
import pytest
import torch

from depthwidth.data import BatchStream, load_dataset
from depthwidth.shapes import Shape, count_params
from depthwidth.shapes.flops import flops
from depthwidth.train import loop as loop_mod
from depthwidth.data import batches as batches_mod
from depthwidth.train import param_groups, train
from depthwidth.model import Transformer


def test_completed_run_records_curve_evals_and_measurements(tiny_shape, tiny_config):
    cfg = tiny_config.with_(eval_every=4)
    r = train(tiny_shape, cfg)
    assert r.status == "completed"
    assert r.steps == 12 and r.tokens == 12 * 4 * 32
    assert [c["step"] for c in r.curve] == list(range(12))
    keys = {"step", "loss", "lr", "grad_norm", "seconds", "cpu_seconds", "tokens_per_s"}
    assert [set(c) for c in r.curve] == [keys | {"warmup"}] * 2 + [keys] * 10  # the warm-up steps are flagged
    assert r.curve[0]["loss"] == pytest.approx(math.log(256), abs=0.3)  # initial loss ~ ln V
    assert r.curve[-1]["loss"] < r.curve[0]["loss"]
    assert [e["step"] for e in r.evals] == [4, 8, 12]
    assert r.evals[-1]["val_loss"] == r.val_loss
    assert r.params == count_params(tiny_shape).total
    assert r.train_flops_per_token == flops(tiny_shape, seq_len=32).train_per_token
    assert r.achieved_flops_per_s == pytest.approx(r.train_flops_per_token * r.tokens_per_s)
    assert r.mfu == pytest.approx(r.achieved_flops_per_s / 1e11)
    assert r.peak_flops_source == "config"
    assert r.saved_activation_bytes > 0 and r.state_bytes > 0
    # params + grads + two AdamW moments, fp32 (the step counters add a few bytes)
    assert 16 * r.params <= r.state_bytes <= 16 * r.params + 1024
    assert r.peak_memory_bytes == r.state_bytes + r.saved_activation_bytes
    assert r.peak_rss_bytes > r.peak_memory_bytes
    assert len(r.val_loss_by_position) == 8 and r.position_buckets[0] == [0, 4]
    assert r.val_loss == pytest.approx(np.mean(r.val_loss_by_position))
    json.dumps(r.to_dict(), allow_nan=False)


def test_two_shapes_see_identical_batches_and_record_the_same_stream_hash(tiny_shape, tiny_config, monkeypatch):
    seen = []
    real = batches_mod.gather_windows

    def record(tokens, positions, seq_len):
        x, y = real(tokens, positions, seq_len)
        seen[-1].append(x.copy())
        return x, y

    monkeypatch.setattr(batches_mod, "gather_windows", record)  # where BatchStream.rows (the trainer's feeder) gathers
    other = Shape(n_layers=1, d_model=48, n_heads=3, vocab_size=256, max_seq_len=64, pos="rope")
    results = []
    for shape in (tiny_shape, other):
        seen.append([])
        results.append(train(shape, tiny_config))
    assert len(seen[0]) == 12
    for a, b in zip(*seen):
        np.testing.assert_array_equal(a, b)
    assert results[0].batch_stream_hash == results[1].batch_stream_hash
    assert results[0].val_loss != results[1].val_loss
    ds = load_dataset(corpus=tiny_config.corpus, cache_dir=tiny_config.cache_dir)
    stream = BatchStream(ds, seq_len=32, batch_size=4, seed=0)
    assert results[0].batch_stream_hash == stream.stream_hash(12)  # computable without training
    assert train(tiny_shape, tiny_config.with_(seed=1)).batch_stream_hash != results[0].batch_stream_hash


def test_same_config_is_deterministic_and_micro_batches_see_the_same_batches(tiny_shape, tiny_config):
    a = train(tiny_shape, tiny_config.with_(dropout=0.1))
    b = train(tiny_shape, tiny_config.with_(dropout=0.1))
    assert [c["loss"] for c in a.curve] == [c["loss"] for c in b.curve]
    plain = train(tiny_shape, tiny_config)
    acc = train(tiny_shape, tiny_config.with_(micro_batch=2))
    assert acc.batch_stream_hash == plain.batch_stream_hash == a.batch_stream_hash
    assert acc.curve[0]["loss"] == pytest.approx(plain.curve[0]["loss"], rel=1e-5)
    assert acc.curve[-1]["loss"] == pytest.approx(plain.curve[-1]["loss"], rel=1e-3)


def test_divergence_ends_the_run_without_raising(tiny_shape, tiny_config, tmp_path):
    r = train(tiny_shape, tiny_config.with_(lr=10.0, grad_clip=0.0), out_dir=tmp_path / "run")
    assert r.status == "diverged"
    assert r.diverged_at_step is not None and r.diverged_at_step < 12
    assert r.steps == r.diverged_at_step + 1
    assert r.val_loss is None
    stored = json.loads((tmp_path / "run" / "result.json").read_text())
    assert stored["status"] == "diverged"
    assert train(tiny_shape, tiny_config).status == "completed"  # the caller carries on


def test_mixture_reports_each_slice_and_weights_the_overall_loss(tiny_shape, tiny_config, tmp_path):
    prose, code = tmp_path / "prose", tmp_path / "code"
    prose.mkdir(), code.mkdir()
    (prose / "a.txt").write_text((tmp_path / "corpus.txt").read_text())
    (code / "b.py").write_text("def f(x):\n    return x + 1\n\n" * 400)
    r = train(tiny_shape, tiny_config.with_(corpus=f"{prose}+{code}"))
    assert set(r.val_loss_by_slice) == {"prose", "code"}
    ds = load_dataset(corpus=f"{prose}+{code}", cache_dir=tiny_config.cache_dir)
    w = {s.name: s.val[1] - s.val[0] for s in ds.slices}
    expected = sum(r.val_loss_by_slice[k] * w[k] for k in w) / sum(w.values())
    assert r.val_loss == pytest.approx(expected)
    assert r.val_loss_by_slice["code"] < r.val_loss_by_slice["prose"]  # the repeated code is easy


def test_weight_decay_skips_norms_biases_and_embeddings():
    shape = Shape(n_layers=1, d_model=16, n_heads=2, vocab_size=64, max_seq_len=8, bias="all")
    model = Transformer(shape)
    from depthwidth.train import TrainConfig

    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = param_groups(model, TrainConfig(steps=1))
    assert {names[id(p)] for p in decay["params"]} == {
        "blocks.0.attn.qkv.weight", "blocks.0.attn.out.weight", "blocks.0.mlp.up.weight", "blocks.0.mlp.down.weight"}
    assert "embed.weight" in {names[id(p)] for p in no_decay["params"]}
    with_emb, _ = param_groups(model, TrainConfig(steps=1, decay_embeddings=True))
    assert {"embed.weight", "pos_embed.weight"} <= {names[id(p)] for p in with_emb["params"]}


def test_bad_input_raises_before_anything_is_written(tiny_shape, tiny_config, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="max_seq_len"):
        train(tiny_shape, tiny_config.with_(seq_len=64), out_dir=out)
    with pytest.raises(ValueError, match="fewer than one batch"):
        train(tiny_shape, tiny_config.with_(batch_size=2000), out_dir=out)
    with pytest.raises(ValueError, match="fp16"):
        train(tiny_shape, tiny_config.with_(dtype="fp16", device="cpu"), out_dir=out)
    with pytest.raises(ValueError, match="vocab"):
        train(tiny_shape.with_(vocab_size=100), tiny_config, out_dir=out)
    with pytest.raises(FileNotFoundError):
        train(tiny_shape, tiny_config.with_(corpus=str(tmp_path / "nope.txt")), out_dir=out)
    assert not out.exists()


def test_a_folder_holding_a_run_is_never_overwritten(tiny_shape, tiny_config, tmp_path):
    out = tmp_path / "run"
    first = train(tiny_shape, tiny_config, out_dir=out)
    before = (out / "result.json").read_bytes()
    with pytest.raises(ValueError, match="already holds a finished run"):
        train(tiny_shape, tiny_config, out_dir=out)
    with pytest.raises(ValueError, match="different run"):
        train(tiny_shape, tiny_config.with_(lr=2e-3), out_dir=out, resume=True)
    assert (out / "result.json").read_bytes() == before
    again = train(tiny_shape, tiny_config, out_dir=out, resume=True)  # a finished run is returned
    assert again.val_loss == first.val_loss and again.curve == first.curve


def test_threads_and_determinism_settings_are_restored(tiny_shape, tiny_config):
    def settings():
        return (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
                torch.utils.deterministic.fill_uninitialized_memory)

    before = settings()
    r = train(tiny_shape, tiny_config)
    assert r.threads == 1
    assert settings() == before


def test_peak_flops_comes_from_a_matching_hw_profile(tiny_shape, tiny_config, tmp_path):
    from dataclasses import replace

    from depthwidth.machine import HardwareProfile, device_name, profile_path, save_profile

    cache = tmp_path / "cache"
    profile = HardwareProfile(device="cpu", device_name=device_name("cpu"), threads=1, gemm=(),
                              peak_flops={"fp32": 123e9, "bf16": 456e9}, copy_bandwidth=None, op_overhead_s=None,
                              op_overheads={}, mem_capacity=8e9, torch_version=torch.__version__,
                              created="2026-01-01T00:00:00+00:00")
    shared = save_profile(profile, profile_path(cache=cache))
    r = train(tiny_shape, tiny_config.with_(peak_flops=None))
    assert r.peak_flops == 123e9 and r.peak_flops_source == f"profile:{shared}"
    assert r.mfu == pytest.approx(r.achieved_flops_per_s / 123e9)
    shared.unlink()
    sibling = save_profile(replace(profile, peak_flops={"fp32": 99e9}), profile_path(threads=1, cache=cache))
    assert sibling.name == "hw-profile-1threads.json"
    assert train(tiny_shape, tiny_config.with_(peak_flops=None)).peak_flops == 99e9  # the per-thread sibling
    sibling.unlink()
    save_profile(replace(profile, threads=2), profile_path(cache=cache))
    r = train(tiny_shape, tiny_config.with_(peak_flops=None))  # measured with other threads: a GEMM is timed
    assert r.peak_flops_source.startswith("measured:gemm")
    again = train(tiny_shape, tiny_config.with_(peak_flops=None))  # and kept in the profile of these threads
    assert again.peak_flops == r.peak_flops and again.peak_flops_source.startswith("profile:")


def test_a_runtime_failure_returns_failed_and_leaves_no_result(tiny_shape, tiny_config, tmp_path, monkeypatch):
    real = loop_mod._Run._step

    def step(self, step, meter):
        if step == 7:
            raise RuntimeError("CPU out of memory: tried to allocate 1 TiB\nmore detail")
        return real(self, step, meter)

    monkeypatch.setattr(loop_mod._Run, "_step", step)
    out = tmp_path / "run"
    r = train(tiny_shape, tiny_config.with_(checkpoint_every=5), out_dir=out)
    assert r.status == "failed"
    assert r.error == "RuntimeError: CPU out of memory: tried to allocate 1 TiB"
    assert r.steps == 7 and r.val_loss is None
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "error.json", "run.json"]
    monkeypatch.setattr(loop_mod._Run, "_step", real)
    resumed = train(tiny_shape, tiny_config.with_(checkpoint_every=5), out_dir=out, resume=True)
    assert resumed.status == "completed" and resumed.steps == 12
    assert not (out / "error.json").exists()
    assert [c["loss"] for c in resumed.curve] == [c["loss"] for c in train(tiny_shape, tiny_config).curve]
