"""The stored profile: JSON round trip with an atomic write, profiles written by earlier versions,
GEMM-only profiles, clear errors for bad files, and the conversion to a HardwareSpec."""

import json

import pytest

from depthwidth.machine import (
    GemmResult,
    HardwareProfile,
    load_profile,
    profile_path,
    profile_to_hardware,
    save_profile,
)
from depthwidth.shapes.hardware import HardwareSpec
from depthwidth.shapes.latency import predict_decode
from depthwidth.shapes.shape import Shape

#: a profile as `depthwidth hw measure` wrote it before the machine module existed (schema 1)
OLD_LAYOUT = """{
  "schema": 1,
  "device": "cpu",
  "device_name": "Intel(R) Xeon(R) Processor",
  "threads": 2,
  "torch_version": "2.5.1+cpu",
  "created": "2025-11-02T10:00:00+00:00",
  "quick": false,
  "peak_flops": {"fp32": 150000000000.0, "bf16": 900000000000.0},
  "copy_bandwidth": 12000000000.0,
  "op_overhead_s": 1.1e-05,
  "op_overheads": {"add": 2e-06, "mm": 3e-06, "linear": 4e-06, "eager_block_op": 1.1e-05},
  "mem_capacity": 8000000000.0,
  "gemm": [
    {"dtype": "fp32", "path": "torch.mm", "n": 2048, "seconds": 0.2, "flops_per_s": 85899345920.0},
    {"dtype": "fp32", "path": "mkldnn_linear", "n": 2048, "seconds": 0.11, "flops_per_s": 150000000000.0},
    {"dtype": "bf16", "path": "torch.mm", "n": 2048, "seconds": 0.02, "flops_per_s": 900000000000.0}
  ]
}
"""


@pytest.fixture
def old(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    path = profile_path()  # <cache>/hw-profile.json, the name earlier versions used
    path.write_text(OLD_LAYOUT)
    return load_profile(path)


def test_a_profile_in_the_old_layout_still_loads(old):
    assert old.device_name == "Intel(R) Xeon(R) Processor" and old.threads == 2 and old.complete
    assert old.peak_flops == {"fp32": 150e9, "bf16": 900e9} and old.path_flops("fp32", "torch.mm") == 85899345920.0
    assert old.to_dict() == json.loads(OLD_LAYOUT)


def test_save_is_atomic_and_round_trips(old, tmp_path):
    path = save_profile(old, tmp_path / "sub" / "p.json")
    assert path.is_file() and sorted(p.name for p in path.parent.iterdir()) == ["p.json"]
    assert load_profile(path) == old


def test_a_gemm_only_profile_merges_and_refuses_to_predict(old):
    gemm = (GemmResult(dtype="fp32", path="torch.mm", n=64, seconds=1.0, flops_per_s=200e9),)
    merged = old.with_gemm(gemm, created="2026-01-01T00:00:00+00:00")
    assert merged.peak_flops == {"fp32": 200e9, "bf16": 900e9} and len(merged.gemm) == 3
    assert merged.path_flops("fp32", "torch.mm") == 200e9 and merged.path_flops("fp32", "mkldnn_linear") == 150e9
    only = HardwareProfile(**{**{k: getattr(old, k) for k in HardwareProfile.__dataclass_fields__},
                              "gemm": gemm, "peak_flops": {"fp32": 200e9}, "copy_bandwidth": None,
                              "op_overhead_s": None, "op_overheads": {}})
    assert not only.complete and HardwareProfile.from_dict(only.to_dict()) == only
    with pytest.raises(ValueError, match="GEMM peaks only; run `depthwidth hw measure`"):
        profile_to_hardware(only)
    with pytest.raises(ValueError, match="both measured or both null"):
        HardwareProfile(**{**{k: getattr(only, k) for k in HardwareProfile.__dataclass_fields__}, "op_overhead_s": 1e-6})


def test_bad_files_say_which_file_and_what_is_wrong(old, tmp_path):
    with pytest.raises(FileNotFoundError, match="none.json.*hw measure"):
        load_profile(tmp_path / "none.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json.*invalid JSON"):
        load_profile(broken)
    wrong = tmp_path / "wrong.json"
    data = old.to_dict()
    for change, match in (({"peak_flops": {"fp32": -5}}, "peak_flops"), ({"threads": 0}, "threads=0"),
                          ({"schema": 2}, "schema=2"), ({"gemm": [1]}, "gemm.*list of objects")):
        wrong.write_text(json.dumps({**data, **change}))
        with pytest.raises(ValueError, match=f"wrong.json.*{match}"):
            load_profile(wrong)
    wrong.write_text(json.dumps({k: v for k, v in data.items() if k != "copy_bandwidth"}))
    with pytest.raises(ValueError, match="wrong.json.*copy_bandwidth"):
        load_profile(wrong)
    wrong.write_text("[1, 2]")
    with pytest.raises(ValueError, match="wrong.json.*JSON object"):
        load_profile(wrong)


def test_profile_to_hardware_drives_the_roofline(old):
    spec = profile_to_hardware(old)
    assert isinstance(spec, HardwareSpec) and spec.name == "measured-cpu" and spec.kind == "cpu"
    assert spec.peak("fp32") == 150e9 and spec.flops_efficiency == 1.0 and spec.link_bandwidth == 0
    assert spec.mem_bandwidth == 12e9 and spec.op_overhead_s == 1.1e-5
    assert profile_to_hardware(old, gemm_path="torch.mm").peak("fp32") == 85899345920.0
    shape = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=64)
    assert predict_decode(shape, hardware=spec, batch=1, context=8, dtype="fp32").total_s > 0
    with pytest.raises(ValueError, match="gemm_path='blas'"):
        profile_to_hardware(old, gemm_path="blas")


def test_a_gpu_profile_takes_links_from_the_table(old):
    gpu = HardwareProfile(**{**{k: getattr(old, k) for k in HardwareProfile.__dataclass_fields__},
                             "device": "cuda", "device_name": "NVIDIA H200", "mem_capacity": 141e9})
    spec = profile_to_hardware(gpu)
    assert spec.kind == "gpu" and spec.link_bandwidth == 450e9
