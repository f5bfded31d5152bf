"""One profile per device, keyed by kind and name: a CUDA profile never replaces the CPU one nor one of
another GPU model; an old profile file (and one a newer version wrote, with more fields) still loads."""

import json

import pytest

from depthwidth.machine import (
    GemmResult,
    HardwareProfile,
    ProfileMatch,
    find_profile,
    load_profile,
    profile_candidates,
    profile_path,
    profile_to_hardware,
    save_profile,
)


def _profile(device="cpu", name="Intel(R) Xeon(R) Processor", threads=2, mem_capacity=8e10, **extra):
    gemm = (GemmResult(dtype="fp32", path="torch.mm", n=2048, seconds=0.1, flops_per_s=1.7e11),)
    return HardwareProfile(device=device, device_name=name, threads=threads, gemm=gemm, peak_flops={"fp32": 1.7e11},
                           copy_bandwidth=2e10, op_overhead_s=1e-5, op_overheads={"add": 1e-6}, mem_capacity=mem_capacity,
                           torch_version="2.13.0", created="2026-12-01T12:00:00+00:00", **extra)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    monkeypatch.delenv("DEPTHWIDTH_HW_PROFILE", raising=False)
    return tmp_path


def test_cpu_and_cuda_profiles_live_in_their_own_files(cache):
    cpu = profile_path(threads=2)
    h100 = profile_path(threads=2, device="cuda", device_name="NVIDIA H100 80GB HBM3")
    l4 = profile_path(device="cuda:1", device_name="NVIDIA L4")
    assert h100 == cache / "hw-profile-cuda-nvidia-h100-80gb-hbm3.json" and l4 == cache / "hw-profile-cuda-nvidia-l4.json"
    assert len({cpu, h100, l4}) == 3
    save_profile(_profile(), cpu)
    save_profile(_profile("cuda", "NVIDIA H100 80GB HBM3", mem_capacity=80e9), h100)
    save_profile(_profile("cuda", "NVIDIA L4"), l4)
    assert load_profile(cpu).device == "cpu"  # not replaced by either GPU
    found = find_profile(ProfileMatch(device="cuda", device_name="NVIDIA L4"))
    assert found[0] == l4 and found[1].device_name == "NVIDIA L4"
    found = find_profile(ProfileMatch(device="cuda", device_name="NVIDIA H100 80GB HBM3"))
    assert found[0] == h100 and profile_to_hardware(found[1]).link_bandwidth == 450e9  # the SXM row's links
    assert find_profile(ProfileMatch(threads=2, device="cpu"))[0] == cpu


def test_a_cuda_profile_where_earlier_versions_kept_it_still_loads(cache):
    old = cache / "hw-profile.json"  # a CUDA profile written before profiles were keyed by device
    save_profile(_profile("cuda", "NVIDIA H100 PCIe"), old)
    assert profile_candidates(device="cuda", device_name="NVIDIA H100 PCIe") == (
        cache / "hw-profile-cuda-nvidia-h100-pcie.json", old)
    found = find_profile(ProfileMatch(device="cuda", device_name="NVIDIA H100 PCIe"))
    assert found[0] == old and profile_to_hardware(found[1]).link_bandwidth == 300e9  # the PCIe row, not SXM
    assert find_profile(ProfileMatch(device="cuda", device_name="NVIDIA L4")) is None  # another GPU's: not used


def test_fields_of_a_newer_version_are_ignored_and_new_fields_have_defaults(cache):
    path = cache / "p.json"
    data = _profile().to_dict()
    assert "emulated" not in data  # nothing emulated: the layout earlier versions wrote and read
    path.write_text(json.dumps({**data, "a_later_field": [1, 2], "gemm": [{**data["gemm"][0], "more": 1}]}))
    assert load_profile(path) == _profile()
    slow = _profile(emulated={"bf16": 270.0})
    assert HardwareProfile.from_dict(slow.to_dict()).emulated == {"bf16": 270.0}
    with pytest.raises(ValueError, match="emulated"):
        _profile(emulated={"bf16": -1})


def test_hw_measure_takes_the_device_settings_of_train(cli_error):
    assert "device='mps' is not allowed; expected auto, cpu, cuda or cuda:N" in cli_error(
        ["hw", "measure", "--device", "mps"])
    import torch

    if not torch.cuda.is_available():
        assert cli_error(["hw", "measure", "--quick", "--device", "cuda:1"]).endswith(
            "device='cuda:1' but torch sees no CUDA device; use device='cpu' or 'auto'")
