"""Capabilities from /proc/cpuinfo text: the CPU name, its flags and whether bf16 is native."""

import pytest

from depthwidth.machine import (
    BF16_CPU_FLAGS,
    DeviceCapabilities,
    capabilities,
    cpu_capabilities,
    device_kind,
    parse_cpuinfo,
)

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 avx512f {extra}
bogomips\t: 4000.00

processor\t: 1
model name\t: a second socket that is not read
flags\t\t: fpu
"""


@pytest.mark.parametrize("extra,native", [("avx512_bf16", True), ("amx_tile amx_bf16", True),
                                          ("avx512_vnni amx_int8", False), ("", False)])
def test_bf16_is_native_only_with_avx512_bf16_or_amx_bf16(extra, native):
    info = parse_cpuinfo(CPUINFO.format(extra=extra))
    assert info.model_name == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"fpu", "avx512f"} <= info.flags and "avx512f" in info.flags
    caps = cpu_capabilities(info)
    assert caps.device == "cpu" and caps.name == info.model_name and caps.bf16_native is native
    assert caps.dtypes == (("fp32", "bf16") if native else ("fp32",))


def test_text_without_the_fields_gives_an_empty_info():
    info = parse_cpuinfo("processor : 0\nFeatures : fp asimd\n")  # an ARM board: no model name or flags
    assert info.model_name == "" and info.flags == frozenset()
    caps = cpu_capabilities(info)
    assert caps.name and not caps.bf16_native  # a name from platform, never empty
    assert set(BF16_CPU_FLAGS) == {"avx512_bf16", "amx_bf16"}


def test_this_machine_and_the_cuda_dtypes():
    caps = capabilities("cpu")
    assert caps.bf16_native == bool(set(BF16_CPU_FLAGS) & caps.flags)
    gpu = DeviceCapabilities(device="cuda", name="NVIDIA H200", bf16_native=True)
    assert gpu.dtypes == ("fp32", "tf32", "bf16", "fp16")
    assert DeviceCapabilities(device="cuda", name="T4", bf16_native=False).dtypes == ("fp32", "tf32", "fp16")


def test_device_kinds():
    import torch

    assert device_kind("cpu") == "cpu" and device_kind("cuda:1") == "cuda" and device_kind(torch.device("cpu")) == "cpu"
    with pytest.raises(ValueError, match="device='mps' is not allowed; expected cpu, cuda or cuda:N"):
        device_kind("mps")
