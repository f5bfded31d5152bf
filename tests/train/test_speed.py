"""How the trainer executes (train/speed.py), checked on the CPU: warm-up accounting by count in both flush
modes, checkpoints loaded onto the CPU with optimizer state following the parameters (a meta-device model
stands in for a GPU), the dtype a CUDA run trains in (a faked capability), the vendor peak of a GPU name,
old results loading, and torch.compile against eager."""

import time

import pytest
import torch

from depthwidth.machine import DeviceCapabilities
from depthwidth.model import Transformer
from depthwidth.shapes.hardware import HARDWARE
from depthwidth.train import TrainConfig, train
from depthwidth.artifact import checkpoint as ckpt
from depthwidth.artifact.folder import CHECKPOINT
from depthwidth.train import loop as loop_mod
from depthwidth.train import speed
from depthwidth.artifact.config import identity_dict
from depthwidth.train.optim import make_optimizer
from depthwidth.artifact.result import TrainResult


def _timed(result):
    timed = [c for c in result.curve if not c.get("warmup")]
    return len(timed) * result.config["batch_size"] * result.config["seq_len"] / sum(c["seconds"] for c in timed)


def test_warmup_steps_are_flagged_and_left_out_of_tokens_per_s(tiny_shape, tiny_config):
    r = train(tiny_shape, tiny_config)
    assert [c["step"] for c in r.curve if c.get("warmup")] == list(range(speed.WARMUP_STEPS))
    assert r.tokens_per_s == pytest.approx(_timed(r))
    assert r.compiled is False and r.tf32 is False and r.dtype == "fp32"
    assert r.mfu_vendor is None and r.vendor_peak_flops is None  # no vendor peak for a CPU


def test_grouped_flushes_still_time_the_warmup_steps_one_by_one(tiny_shape, tiny_config, monkeypatch):
    """The CUDA mode (losses read 16 steps at a time) on the CPU: each warm-up step is its own group."""
    monkeypatch.setattr(speed, "flush_every", lambda device: 16)
    eager = train(tiny_shape, tiny_config)
    monkeypatch.setattr(speed, "flush_every", lambda device: 4)
    grouped = train(tiny_shape, tiny_config)
    seconds = [c["seconds"] for c in grouped.curve]
    assert len(set(seconds[2:6])) == 1 and len(set(seconds[6:10])) == 1 and len(set(seconds[10:])) == 1
    assert seconds[0] != seconds[1] != seconds[2]  # steps 0 and 1 flushed alone
    assert grouped.tokens_per_s == pytest.approx(_timed(grouped))
    # how often losses are read changes no number
    assert [(c["loss"], c["grad_norm"]) for c in grouped.curve] == [(c["loss"], c["grad_norm"]) for c in eager.curve]


def test_a_resumed_process_warms_up_again(tiny_shape, tiny_config, tmp_path, monkeypatch):
    real = loop_mod._Run._step

    def failing(self, step, meter):
        if step == 8:
            raise RuntimeError("stopped")
        return real(self, step, meter)

    cfg = tiny_config.with_(checkpoint_every=6)
    monkeypatch.setattr(loop_mod._Run, "_step", failing)
    assert train(tiny_shape, cfg, out_dir=tmp_path / "run").status == "failed"  # checkpoint of step 6 kept
    monkeypatch.setattr(loop_mod._Run, "_step", real)
    resumed = train(tiny_shape, cfg, out_dir=tmp_path / "run", resume=True)
    assert resumed.status == "completed"
    assert [c["step"] for c in resumed.curve if c.get("warmup")] == [0, 1, 6, 7]
    assert resumed.tokens_per_s == pytest.approx(_timed(resumed))


def test_checkpoints_load_onto_the_cpu_and_optimizer_state_follows_the_parameters(tiny_shape, tiny_config,
                                                                                   tmp_path, monkeypatch):
    real_load = torch.load
    for kernel, step_device in (("foreach", "cpu"), ("fused", "meta")):
        train(tiny_shape, tiny_config.with_(steps=3, adamw=kernel), out_dir=tmp_path / kernel)
        seen = []
        monkeypatch.setattr(torch, "load", lambda *a, **k: seen.append(k.get("map_location")) or real_load(*a, **k))
        payload = ckpt.load_checkpoint(tmp_path / kernel / CHECKPOINT, device=torch.device("cuda", 3))
        assert seen == ["cpu"]  # whatever device the run is on
        tensors = [*payload["model"].values(), *payload["rng"].values()]
        tensors += [v for s in payload["optimizer"]["state"].values() for v in s.values() if torch.is_tensor(v)]
        assert tensors and all(t.device.type == "cpu" for t in tensors)
        # a model on another device (meta stands in for a GPU): the moments move to it; the step counters stay
        # on the CPU for the foreach AdamW and follow the parameters for the fused one (its kernel reads them)
        with torch.device("meta"):
            model = Transformer(tiny_shape)
        opt = make_optimizer(model, tiny_config.with_(adamw=kernel))
        opt.load_state_dict(payload["optimizer"])
        states = list(opt.state.values())
        assert len(states) == len(list(model.parameters()))
        assert all(s["exp_avg"].device.type == "meta" and s["exp_avg_sq"].device.type == "meta" for s in states)
        assert all(s["step"].device.type == step_device for s in states), kernel
        assert all(float(s["step"]) == 3.0 for s in payload["optimizer"]["state"].values())


def _fake_gpu(monkeypatch, *, bf16: bool, name: str = "NVIDIA H200"):
    import depthwidth.machine as machine

    caps = DeviceCapabilities(device="cuda", name=name, bf16_native=bf16)
    monkeypatch.setattr(machine, "capabilities", lambda device="cpu": caps)


def test_a_cuda_run_trains_in_bf16_by_default_and_the_cpu_keeps_its_dtype(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    base = TrainConfig(steps=3)
    assert speed.run_dtype(base, cpu) == "fp32" and speed.run_dtype(base.with_(dtype="bf16"), cpu) == "bf16"
    _fake_gpu(monkeypatch, bf16=True)
    assert speed.run_dtype(base, cuda) == "bf16"
    assert speed.run_dtype(base.with_(cuda_dtype="fp32"), cuda) == "fp32"
    assert speed.run_dtype(base.with_(dtype="bf16", cuda_dtype="fp32"), cuda) == "fp32"
    _fake_gpu(monkeypatch, bf16=False, name="Tesla V100")
    assert speed.run_dtype(base, cuda) == "fp32"  # no native bf16: fp32 (with TF32 where it exists)
    # the new setting leaves a default run's identity (and so every stored hash) as it was
    assert "cuda_dtype" not in identity_dict(base)
    assert "cuda_dtype" in identity_dict(base.with_(cuda_dtype="fp32"))
    assert base.config_hash() != base.with_(cuda_dtype="fp32").config_hash()  # an explicit fp32 CUDA run


@pytest.mark.parametrize("name,dtype,row,rate", [("NVIDIA H200", "bf16", "h200", "bf16"),
                                                  ("NVIDIA H200", "fp32", "h200", "tf32"),
                                                  ("NVIDIA GeForce GTX 1080", "bf16", None, None)])
def test_the_vendor_peak_is_the_table_row_of_the_gpu(monkeypatch, name, dtype, row, rate):
    assert speed.vendor_peak(torch.device("cpu"), "fp32") == (None, "")

    class Props:
        total_memory = 141e9

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: Props())
    peak, source = speed.vendor_peak(torch.device("cuda"), dtype)
    if row is None:
        assert (peak, source) == (None, "")
    else:
        assert peak == HARDWARE[row].peak_flops[rate] and source == f"table:{row}"


def test_results_written_before_the_new_columns_still_load(tiny_shape, tiny_config):
    data = train(tiny_shape, tiny_config.with_(steps=3)).to_dict()
    for key in ("mfu_vendor", "vendor_peak_flops", "vendor_peak_source", "compiled", "tf32"):
        data.pop(key)
    old = TrainResult.from_dict(data)
    assert old.mfu_vendor is None and old.vendor_peak_source == "" and old.compiled is False and old.tf32 is False


def test_device_settings_change_nothing_on_the_cpu(tiny_config):
    before = (torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled())
    with speed.device_settings(tiny_config.with_(deterministic=True), torch.device("cpu")) as tf32:
        assert tf32 is False
        assert (torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled()) == before


def test_compile_trains_the_same_losses_as_eager(tiny_shape, tiny_config, monkeypatch):
    """The plumbing with torch.compile's aot_eager backend (the same traced graphs, no code generation:
    seconds, not minutes, on 2 cores); the inductor test below is slow."""
    monkeypatch.setattr(speed, "COMPILE_BACKEND", "aot_eager")
    cfg = tiny_config.with_(steps=4)
    eager = train(tiny_shape, cfg)
    t0 = time.perf_counter()
    compiled = train(tiny_shape, cfg.with_(compile=True))
    print(f"aot_eager compile run: {time.perf_counter() - t0:.1f} s")
    assert compiled.compiled and compiled.config["compile"] is True and not eager.compiled
    assert [c["loss"] for c in compiled.curve] == pytest.approx([c["loss"] for c in eager.curve], rel=1e-5)
    assert compiled.val_loss == pytest.approx(eager.val_loss, rel=1e-5)
    assert compiled.config_hash != eager.config_hash  # compile=true is part of the run's identity


@pytest.mark.slow
def test_inductor_compile_trains_the_same_losses_as_eager(tiny_shape, tiny_config):
    cfg = tiny_config.with_(steps=6)
    t0 = time.perf_counter()
    eager = train(tiny_shape, cfg)
    t1 = time.perf_counter()
    compiled = train(tiny_shape, cfg.with_(compile=True))
    t2 = time.perf_counter()
    print(f"eager {t1 - t0:.1f} s, inductor {t2 - t1:.1f} s (compilation included); "
          f"max |dloss| {max(abs(a['loss'] - b['loss']) for a, b in zip(eager.curve, compiled.curve)):.2e}")
    assert compiled.compiled
    assert [c["loss"] for c in compiled.curve] == pytest.approx([c["loss"] for c in eager.curve], rel=1e-4)
