"""Capabilities from /proc/cpuinfo text: the CPU name, its flags and whether bf16 is native."""

import pytest

from depthwidth.machine import (
    BF16_CPU_FLAGS,
    DeviceCapabilities,
    capabilities,
    cpu_capabilities,
    cuda_capabilities,
    cuda_index,
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
    # a pre-Ampere GPU: tf32 does not exist there (an fp32 GEMM with TF32 allowed is plain fp32)
    assert DeviceCapabilities(device="cuda", name="T4", bf16_native=False).dtypes == ("fp32", "fp16")


@pytest.mark.parametrize("name,cc,native", [
    ("Tesla T4", (7, 5), {"fp32", "fp16"}),
    ("Tesla V100-SXM2-16GB", (7, 0), {"fp32", "fp16"}),
    ("NVIDIA A100-SXM4-80GB", (8, 0), {"fp32", "fp16", "tf32", "bf16"}),
    ("NVIDIA L4", (8, 9), {"fp32", "fp16", "tf32", "bf16", "fp8"}),
    ("NVIDIA H100 80GB HBM3", (9, 0), {"fp32", "fp16", "tf32", "bf16", "fp8"}),
])
def test_cuda_native_dtypes_follow_the_compute_capability(name, cc, native):
    caps = cuda_capabilities(name, cc, index=1)
    assert caps.native == native and caps.bf16_native == ("bf16" in native) and caps.index == 1
    assert caps.dtypes == tuple(d for d in ("fp32", "tf32", "bf16", "fp16") if d in native)
    assert caps.features == (f"sm_{cc[0]}{cc[1]}",)
    assert caps.describe() == f"{name} (cuda: sm_{cc[0]}{cc[1]}); native: " + ", ".join(
        d for d in ("fp32", "tf32", "bf16", "fp16", "fp8") if d in native)


def test_cpu_features_and_the_line_that_names_them():
    amx = cpu_capabilities(parse_cpuinfo(CPUINFO.format(extra="avx512_bf16 amx_tile amx_bf16")))
    assert amx.features == ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    assert amx.describe() == ("Intel(R) Xeon(R) Platinum 8480+ (cpu: avx2, avx512f, avx512_bf16, amx_bf16, "
                              "amx_tile); native: fp32, bf16")
    epyc = cpu_capabilities(parse_cpuinfo(CPUINFO.format(extra="").replace(" avx512f", "")))
    assert epyc.features == ("avx2",) and epyc.native == {"fp32"} and not epyc.is_native("bf16")


@pytest.mark.parametrize("device,count,index", [("cuda", 1, 0), ("cuda:0", 2, 0), ("cuda:1", 2, 1), ("cuda:7", 8, 7)])
def test_cuda_index_of_a_device_that_exists(device, count, index):
    assert cuda_index(device, count) == index


@pytest.mark.parametrize("device,count,message", [
    ("cuda:1", 1, "device='cuda:1': there is no GPU 1; torch sees 1 (cuda:0)"),
    ("cuda:4", 4, "device='cuda:4': there is no GPU 4; torch sees 4 (cuda:0 to cuda:3)"),
    ("cuda", 0, "device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'"),
    ("cuda:0", 0, "device='cuda:0' but torch sees no CUDA device; use device='cpu' or 'auto'"),
    ("cuda:x", 2, "device='cuda:x' is not allowed; expected cpu, cuda or cuda:N"),
])
def test_cuda_index_refuses_a_gpu_that_is_not_there(device, count, message):
    with pytest.raises(ValueError) as info:
        cuda_index(device, count)
    assert str(info.value) == message


def test_device_kinds():
    import torch

    assert device_kind("cpu") == "cpu" and device_kind("cuda:1") == "cuda" and device_kind(torch.device("cpu")) == "cpu"
    with pytest.raises(ValueError, match="device='mps' is not allowed; expected cpu, cuda or cuda:N"):
        device_kind("mps")
