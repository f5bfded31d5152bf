"""The measurement: a quick profile, default dtypes by capability, untouched global state, and the
cached profile that is measured once and then read back."""

import pytest
import torch

import depthwidth.machine.device as device_mod
from depthwidth.machine import (
    EAGER_BLOCK_OP,
    CpuInfo,
    cached_profile,
    cpu_capabilities,
    default_gemm_n,
    load_profile,
    measure_gemm,
    measure_profile,
    profile_path,
)


def _no_native_bf16(monkeypatch):
    plain = cpu_capabilities(CpuInfo(model_name="plain cpu", flags=frozenset({"avx2"})))
    monkeypatch.setattr(device_mod, "cpu_capabilities", lambda info=None: plain)


@pytest.fixture(scope="module")
def quick():
    return measure_profile(quick=True, threads=1, device="cpu", dtypes=("fp32", "bf16"),
                           block_overhead=lambda *, device, repeat: 7e-6)


def test_quick_profile_measures_every_dtype_and_path(quick):
    assert quick.device == "cpu" and quick.threads == 1 and quick.quick and quick.complete
    assert set(quick.peak_flops) == {"fp32", "bf16"}
    for dtype in ("fp32", "bf16"):
        rates = [g.flops_per_s for g in quick.gemm if g.dtype == dtype]
        assert quick.peak_flops[dtype] == max(rates) > 1e8  # best path is the peak; > 0.1 GFLOP/s
    for g in quick.gemm:
        assert g.flops_per_s == pytest.approx(2 * g.n**3 / g.seconds)
    assert {g.path for g in quick.gemm} >= {"torch.mm"}
    assert quick.copy_bandwidth > 1e8 and quick.mem_capacity > 2**28
    assert quick.op_overhead_s == quick.op_overheads[EAGER_BLOCK_OP] == 7e-6
    assert set(quick.op_overheads) >= {"add", "mm", "linear"}


def test_default_dtypes_skip_emulated_bf16(monkeypatch):
    _no_native_bf16(monkeypatch)
    profile = measure_profile(quick=True, threads=1, device="cpu")
    assert set(profile.peak_flops) == {"fp32"} and profile.device_name == "plain cpu"
    # without a block cost the per-op cost is the largest tiny-op cost (a lower bound)
    assert profile.op_overhead_s == max(profile.op_overheads.values()) and EAGER_BLOCK_OP not in profile.op_overheads
    assert default_gemm_n(dtype="bf16") == 256 and default_gemm_n(dtype="bf16", quick=True) == 128
    assert default_gemm_n(dtype="fp32") == 2048 and default_gemm_n(device="cuda:0", dtype="bf16") == 8192


def test_measurement_leaves_the_global_rng_and_threads_alone():
    torch.manual_seed(123)
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    (first, *_) = measure_gemm(dtype="fp32", n=64, repeat=1)
    assert first.n == 64 and first.path == "torch.mm"
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="fp16.*never"):
        measure_gemm(dtype="fp16", device="cpu")
    with pytest.raises(ValueError, match="threads=0"):
        measure_profile(threads=0, device="cpu")
    with pytest.raises(ValueError, match="device='tpu'"):
        measure_profile(device="tpu")


def test_cached_profile_is_measured_once_then_read(tmp_path, monkeypatch, quick):
    import depthwidth.machine.measure as measure_mod

    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    calls = []

    def fake_measure(**kwargs):
        calls.append(kwargs)
        return measure_mod.HardwareProfile(**{**{k: getattr(quick, k) for k in quick.__dataclass_fields__},
                                              "quick": False, "threads": kwargs["threads"]})

    monkeypatch.setattr(measure_mod, "measure_profile", fake_measure)
    block = lambda *, device, repeat: 7e-6
    first = cached_profile(threads=1, dtypes=("fp32",), block_overhead=block)
    assert len(calls) == 1 and calls[0]["block_overhead"] is block
    assert load_profile(profile_path(threads=1)) == first
    assert cached_profile(threads=1, dtypes=("fp32",), block_overhead=block) == first and len(calls) == 1
    assert [p.name for p in tmp_path.iterdir()] == [profile_path(threads=1).name]
