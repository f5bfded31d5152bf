"""The MFU peak: the config's value, else a stored profile of this machine, else a GEMM timed now
and added to the profile file (the one cache), each saying where it came from."""

import pytest
import torch

from depthwidth.machine import HardwareProfile, device_name, load_profile, peak_flops, profile_path, save_profile


def _profile(**changes) -> HardwareProfile:
    fields = {"device": "cpu", "device_name": device_name("cpu"), "threads": 1, "gemm": (), "peak_flops": {"fp32": 123e9},
                  "copy_bandwidth": 2e10, "op_overhead_s": 4e-6, "op_overheads": {}, "mem_capacity": 8e9,
                  "torch_version": torch.__version__, "created": "2026-01-01T00:00:00+00:00"}
    return HardwareProfile(**{**fields, **changes})


@pytest.fixture
def places(tmp_path, monkeypatch):
    """Cache, home and working folder apart, to see where anything is written."""
    for name in ("cache", "home", "cwd"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DEPTHWIDTH_HW_PROFILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _rel(root, path):
    return str(path.relative_to(root))


def test_the_config_value_comes_first(places):
    peak = peak_flops(dtype="fp32", threads=1, override=5e9)
    assert (peak.flops_per_s, peak.source) == (5e9, "config") and _files(places) == []


def test_a_matching_profile_comes_next_the_per_thread_file_first(places):
    shared = save_profile(_profile(), profile_path())  # <cache>/hw-profile.json, holding a 1-thread profile
    peak = peak_flops(dtype="fp32", device=torch.device("cpu"), threads=1)
    assert peak.flops_per_s == 123e9 and peak.source == f"profile:{shared}"
    sibling = save_profile(_profile(peak_flops={"fp32": 99e9}), profile_path(threads=1))
    if sibling == shared:
        pytest.skip("a one-core machine keeps its 1-thread profile in the shared file")
    assert sibling.name == "hw-profile-1threads.json"
    assert peak_flops(dtype="fp32", threads=1).source == f"profile:{sibling}"
    assert peak_flops(dtype="fp32", threads=1, override=None).flops_per_s == 99e9


@pytest.mark.parametrize("other", [{"threads": 2}, {"quick": True}, {"torch_version": "1.0"},
                                   {"device_name": "another cpu"}, {"peak_flops": {"bf16": 1e12}}])
def test_otherwise_a_gemm_is_timed_and_kept_in_the_profile_file(places, other):
    save_profile(_profile(**other), profile_path())
    peak = peak_flops(dtype="fp32", threads=1, n=64)
    assert peak.source in ("measured:gemm-torch.mm", "measured:gemm-mkldnn_linear") and peak.flops_per_s > 1e6
    stored = load_profile(profile_path(threads=1))
    assert stored.peak_flops["fp32"] == peak.flops_per_s and {g.n for g in stored.gemm} == {64}
    assert not stored.complete and stored.threads == 1 and stored.device_name == device_name("cpu")
    again = peak_flops(dtype="fp32", threads=1, n=64)
    assert again.source == f"profile:{profile_path(threads=1)}" and again.flops_per_s == peak.flops_per_s
    assert _files(places) == sorted({_rel(places, profile_path()), _rel(places, profile_path(threads=1))})


def test_a_timed_gemm_joins_a_profile_of_this_machine(places):
    path = save_profile(_profile(), profile_path(threads=1))
    peak = peak_flops(dtype="bf16", threads=1, n=32)
    assert peak.source.startswith("measured:gemm-")
    merged = load_profile(path)
    assert merged.complete and merged.copy_bandwidth == 2e10  # the rest of the profile is kept
    assert merged.peak_flops == {"fp32": 123e9, "bf16": peak.flops_per_s}
    assert peak_flops(dtype="bf16", threads=1).source == f"profile:{path}"
    assert _files(places) == [_rel(places, path)]


def test_an_explicit_cache_folder_is_used(places):
    folder = places / "cache" / "run"
    peak = peak_flops(dtype="fp32", threads=1, n=32, cache_dir=folder)
    assert peak.source.startswith("measured:gemm-") and (folder / "hw-profile-1threads.json").is_file()
    assert peak_flops(dtype="fp32", threads=1, cache_dir=folder).source.startswith("profile:")
