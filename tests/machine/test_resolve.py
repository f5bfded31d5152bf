"""The one reading of a hardware argument: a table name, "measured" (this machine's stored profile,
by threads) or a profile path, with a one-line UserError naming the argument and the choices."""

import json
import subprocess
import sys

import pytest

from depthwidth.errors import UserError
from depthwidth.machine import (
    MEASURED,
    HardwareProfile,
    hardware_choice,
    profile_path,
    resolve_hardware,
    save_profile,
)


def _profile(*, threads=1, bandwidth=2e10, **changes):
    fields = {"device": "cpu", "device_name": "some cpu", "threads": threads, "gemm": (), "peak_flops": {"fp32": 1e11},
                  "copy_bandwidth": bandwidth, "op_overhead_s": None if bandwidth is None else 4e-6, "op_overheads": {},
                  "mem_capacity": 8e9, "torch_version": "2.0", "created": "2026-01-01T00:00:00+00:00"}
    return HardwareProfile(**{**fields, **changes})


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DEPTHWIDTH_HW_PROFILE", raising=False)
    return tmp_path / "cache"


def test_table_names_and_aliases():
    assert resolve_hardware("h100").name == "h100-sxm" and resolve_hardware(" A100_80GB ").name == "a100-80gb"
    assert hardware_choice("H100") == "h100-sxm" and hardware_choice(" Measured ") == MEASURED
    spec = resolve_hardware("cpu")
    assert resolve_hardware(spec) is spec


def test_measured_is_this_machines_profile_by_threads(cache):
    with pytest.raises(UserError, match=r"--hardware measured: no measured profile of this machine at 3 threads "
                                        r"\(.*hw-profile-3threads.json.*\); run `depthwidth hw measure --threads 3`"):
        resolve_hardware("measured", argument="--hardware", threads=3)
    save_profile(_profile(threads=1, peak_flops={"fp32": 1e11}), profile_path())
    save_profile(_profile(threads=3, peak_flops={"fp32": 3e11}), profile_path(threads=3))
    spec = resolve_hardware("measured", threads=3)
    assert spec.name == "measured-cpu" and spec.peak("fp32") == 3e11 and spec.mem_bandwidth == 2e10
    assert resolve_hardware("measured").peak("fp32") == 1e11  # no thread count: the shared file
    assert resolve_hardware("measured", threads=1).peak("fp32") == 1e11


def test_measured_uses_the_torch_mm_rate_and_skips_gemm_only_profiles(cache):
    from depthwidth.machine import GemmResult

    gemm = (GemmResult(dtype="fp32", path="torch.mm", n=64, seconds=1, flops_per_s=5e10),
            GemmResult(dtype="fp32", path="mkldnn_linear", n=64, seconds=1, flops_per_s=1e11))
    save_profile(_profile(threads=2, gemm=gemm), profile_path(threads=2))
    assert resolve_hardware("measured", threads=2).peak("fp32") == 5e10
    save_profile(_profile(threads=4, bandwidth=None), profile_path(threads=4))
    with pytest.raises(UserError, match="no measured profile of this machine at 4 threads"):
        resolve_hardware("measured", threads=4)


def test_a_profile_path(cache, tmp_path):
    path = save_profile(_profile(peak_flops={"fp32": 7e10}), tmp_path / "p.json")
    assert resolve_hardware(str(path)).peak("fp32") == 7e10 and hardware_choice(str(path)) == str(path)
    plain = tmp_path / "profile"  # an existing file without the .json suffix
    plain.write_text(path.read_text())
    assert resolve_hardware(str(plain)).peak("fp32") == 7e10
    with pytest.raises(UserError, match=r"^--hardware: no hardware profile at .*missing.json; run `depthwidth hw"):
        resolve_hardware(str(tmp_path / "missing.json"), argument="--hardware")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"device": "cpu"}))
    with pytest.raises(UserError, match=r"^hardware: .*bad.json: not a valid hardware profile"):
        resolve_hardware(str(bad))
    gemm_only = save_profile(_profile(bandwidth=None), tmp_path / "g.json")
    with pytest.raises(UserError, match="GEMM peaks only"):
        resolve_hardware(str(gemm_only))


@pytest.mark.parametrize("value,match", [
    ("h900", (r"^--hardware: unknown hardware 'h900'; did you mean h200.*\(known: h100-sxm.*\); or 'measured' "
             r"\(this machine's profile from `depthwidth hw measure`\) or the path of a profile .json$")),
    ("", r"^--hardware='': expected a hardware name of `depthwidth hw list` or 'measured'"),
    (3, r"^--hardware=3: expected a hardware name"),
    ("study", r"^--hardware: unknown hardware 'study'"),  # a report's target (the study's machine), not a machine
])
def test_bad_values_name_the_argument_and_the_choices(value, match):
    with pytest.raises(UserError, match=match):
        resolve_hardware(value, argument="--hardware")


def test_reading_a_profile_or_a_table_name_never_imports_torch(tmp_path):
    path = save_profile(_profile(), tmp_path / "p.json")
    code = ("import sys; from depthwidth.machine import resolve_hardware, load_profile, capabilities; "
            f"resolve_hardware('h100'); resolve_hardware({str(path)!r}); load_profile({str(path)!r}); "
            "capabilities('cpu'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
