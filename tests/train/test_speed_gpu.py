"""The trainer's CUDA paths (skipped without CUDA): bf16 autocast and TF32 by default, fused AdamW, pinned
prefetched batches, the MFU peak timed before the memory peak is reset, AdamW's step counters on the CPU
after a resume, and what determinism promises there: with `deterministic = true` two runs are bit for bit
equal; without it repeated and resumed runs match to a float tolerance (rel 1e-3 on losses), no more."""

import pytest
import torch

from depthwidth.shapes import Shape
from depthwidth.train import train

CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="needs CUDA")]


def _losses(result):
    return [c["loss"] for c in result.curve]


def test_defaults_on_cuda_are_bf16_and_tf32(tiny_shape, tiny_config):
    r = train(tiny_shape, tiny_config.with_(device="cuda", compile=False))
    assert r.status == "completed" and r.device.startswith("cuda")
    assert r.dtype == "bf16" and r.config["dtype"] == "fp32" and r.config["cuda_dtype"] is None
    fp32 = train(tiny_shape, tiny_config.with_(device="cuda", cuda_dtype="fp32", compile=False))
    assert fp32.dtype == "fp32" and fp32.tf32 and fp32.config_hash != r.config_hash
    assert _losses(fp32) == pytest.approx(_losses(r), rel=5e-2)


def test_the_peak_gemm_is_not_in_the_run_memory_peak(tiny_shape, tiny_config):
    r = train(tiny_shape, tiny_config.with_(device="cuda", peak_flops=None, compile=False))
    assert r.peak_flops_source.startswith(("measured", "profile"))
    assert r.peak_memory_bytes < 64 * 2**20  # an 8192^2 fp32 GEMM alone would hold 768 MiB


def test_deterministic_cuda_runs_repeat_bit_for_bit(tiny_shape, tiny_config):
    cfg = tiny_config.with_(device="cuda", deterministic=True, compile=False, dropout=0.1)
    assert _losses(train(tiny_shape, cfg)) == _losses(train(tiny_shape, cfg))


def _stop_at(monkeypatch, at, spy=None):
    from depthwidth.train import loop as loop_mod

    real = loop_mod._Run._step

    def step(self, n, meter):
        if spy is not None:
            spy(self, n)
        if n == at:
            raise RuntimeError("stopped")
        return real(self, n, meter)

    monkeypatch.setattr(loop_mod._Run, "_step", step)
    return lambda: monkeypatch.setattr(loop_mod._Run, "_step", real)


def test_cuda_runs_repeat_and_resume_within_a_tolerance(tiny_shape, tiny_config, tmp_path, monkeypatch):
    cfg = tiny_config.with_(device="cuda", compile=False, checkpoint_every=6)
    ref = train(tiny_shape, cfg)
    assert _losses(train(tiny_shape, cfg)) == pytest.approx(_losses(ref), rel=1e-3)
    undo = _stop_at(monkeypatch, 8)
    assert train(tiny_shape, cfg, out_dir=tmp_path / "run").status == "failed"
    undo()
    resumed = train(tiny_shape, cfg, out_dir=tmp_path / "run", resume=True)
    assert _losses(resumed) == pytest.approx(_losses(ref), rel=1e-3)


def test_resumed_optimizer_state_is_where_adamw_expects_it(tiny_shape, tiny_config, tmp_path, monkeypatch):
    seen = {}

    def spy(run, n):
        if n == 8:
            seen["fused"] = bool(run.optimizer.param_groups[0].get("fused"))
            seen["steps"] = {s["step"].device.type for s in run.optimizer.state.values()}
            seen["moments"] = {s["exp_avg"].device.type for s in run.optimizer.state.values()}

    cfg = tiny_config.with_(device="cuda", compile=False, checkpoint_every=6)
    undo = _stop_at(monkeypatch, 7)
    assert train(tiny_shape, cfg, out_dir=tmp_path / "run").status == "failed"
    undo()
    _stop_at(monkeypatch, -1, spy)
    assert train(tiny_shape, cfg, out_dir=tmp_path / "run", resume=True).status == "completed"
    assert seen["fused"]  # fused AdamW on CUDA
    # fused AdamW keeps its step counters on the parameters' device (torch requires it); foreach on the CPU
    assert seen["moments"] == {"cuda"} and seen["steps"] == ({"cuda"} if seen["fused"] else {"cpu"})


def test_compiled_cuda_training_matches_eager(tiny_config):
    shape = Shape(n_layers=2, d_model=64, n_heads=2, vocab_size=256, max_seq_len=32)
    eager = train(shape, tiny_config.with_(device="cuda", compile=False))
    compiled = train(shape, tiny_config.with_(device="cuda", compile=True))
    assert compiled.compiled and not eager.compiled
    assert _losses(compiled) == pytest.approx(_losses(eager), rel=2e-2)  # bf16 autocast on both
