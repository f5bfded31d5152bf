"""Hardware profile: a quick measurement, JSON round trip, clear errors for bad files, conversion to a spec."""

import json

import pytest
import torch

from depthwidth.bench.hw import (
    HardwareProfile, default_profile_path, load_profile, measure_gemm, measure_profile, profile_to_hardware,
    save_profile,
)
from depthwidth.cli import main
from depthwidth.shapes.hardware import HardwareSpec
from depthwidth.shapes.latency import predict_decode
from depthwidth.shapes.shape import Shape


@pytest.fixture(scope="module")
def quick():
    return measure_profile(quick=True, threads=1, device="cpu")


def test_quick_profile_measures_every_dtype_and_path(quick):
    assert quick.device == "cpu" and quick.threads == 1 and quick.quick
    assert set(quick.peak_flops) == {"fp32", "bf16"}
    for dtype in ("fp32", "bf16"):
        rates = [g.flops_per_s for g in quick.gemm if g.dtype == dtype]
        assert quick.peak_flops[dtype] == max(rates) > 1e8  # best path is the peak; > 0.1 GFLOP/s
        for g in quick.gemm:
            assert g.flops_per_s == pytest.approx(2 * g.n**3 / g.seconds)
    assert {g.path for g in quick.gemm} >= {"torch.mm"}
    assert quick.copy_bandwidth > 1e8 and quick.mem_capacity > 2**28
    assert 0 < quick.op_overhead_s < 1e-2 and set(quick.op_overheads) >= {"add", "mm", "linear"}


def test_measurement_leaves_the_global_rng_and_threads_alone():
    torch.manual_seed(123)
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    measure_gemm(dtype="fp32", n=64, repeat=1)
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="fp16.*never"):
        measure_gemm(dtype="fp16", device="cpu")
    with pytest.raises(ValueError, match="threads"):
        measure_profile(threads=0)


def test_save_load_round_trip(quick, tmp_path):
    path = save_profile(quick, tmp_path / "sub" / "p.json")
    assert path.is_file() and not list(tmp_path.glob("sub/*.tmp"))
    assert load_profile(path) == quick


def test_bad_files_say_which_file_and_what_is_wrong(quick, tmp_path):
    missing = tmp_path / "none.json"
    with pytest.raises(FileNotFoundError, match="none.json.*hw measure"):
        load_profile(missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json.*invalid JSON"):
        load_profile(broken)
    wrong = tmp_path / "wrong.json"
    data = quick.to_dict()
    data["peak_flops"] = {"fp32": -5}
    wrong.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="wrong.json.*peak_flops"):
        load_profile(wrong)
    del data["copy_bandwidth"]
    data["peak_flops"] = {"fp32": 1e9}
    wrong.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="wrong.json.*copy_bandwidth"):
        load_profile(wrong)
    wrong.write_text("[1, 2]")
    with pytest.raises(ValueError, match="wrong.json.*JSON object"):
        load_profile(wrong)


def test_default_path_follows_the_cache_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    assert default_profile_path() == tmp_path / "hw-profile.json"
    monkeypatch.delenv("DEPTHWIDTH_CACHE")
    assert default_profile_path().parts[-3:] == (".cache", "depthwidth", "hw-profile.json")


def test_profile_to_hardware_drives_the_roofline(quick):
    spec = profile_to_hardware(quick)
    assert isinstance(spec, HardwareSpec) and spec.kind == "cpu" and spec.link_bandwidth == 0
    assert spec.peak("fp32") == quick.peak_flops["fp32"] and spec.flops_efficiency == 1.0
    assert spec.mem_bandwidth == quick.copy_bandwidth and spec.op_overhead_s == quick.op_overhead_s
    mm = profile_to_hardware(quick, gemm_path="torch.mm")
    assert mm.peak("fp32") == quick.path_flops("fp32", "torch.mm") <= spec.peak("fp32")
    shape = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=64)
    assert predict_decode(shape, hardware=spec, batch=1, context=8, dtype="fp32").total_s > 0
    with pytest.raises(ValueError, match="gemm_path"):
        profile_to_hardware(quick, gemm_path="blas")


def test_a_gpu_profile_takes_links_from_the_table(quick):
    gpu = HardwareProfile(**{**{k: getattr(quick, k) for k in HardwareProfile.__dataclass_fields__},
                             "device": "cuda", "device_name": "NVIDIA H200", "mem_capacity": 141e9})
    spec = profile_to_hardware(gpu)
    assert spec.kind == "gpu" and spec.link_bandwidth == 450e9


def test_cli_measure_quick_and_list(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["hw", "measure", "--quick", "--threads", "1", "--device", "cpu", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(out) and load_profile(out).peak_flops == printed["peak_flops"]
    assert main(["hw", "list", "--json"]) == 0
    names = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert {"h100-sxm", "h200", "a100-40gb", "a100-80gb", "l4", "rtx-4090", "mi300x", "cpu"} <= set(names)
    assert main(["hw", "measure", "--quick", "--dtypes", "fp16", "--device", "cpu", "--out", str(out)]) == 2
    assert "never use it" in capsys.readouterr().err
