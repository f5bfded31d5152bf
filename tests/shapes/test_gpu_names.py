"""GPU names as the driver reports them map to exactly their table row: H100 SXM, PCIe and NVL apart,
L4 never L40 or L40S, an A100 by its memory, and a variant the table lacks to no row at all."""

import pytest

from depthwidth.shapes.hardware import HARDWARE, match_gpu


@pytest.mark.parametrize("name,row", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 SXM5 80GB", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H200 NVL", None),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100 80GB PCIe", None),
    ("NVIDIA A100-PCIE-40GB", None),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA GeForce RTX 4080", None),
    ("AMD Instinct MI300X", "mi300x"),
    ("Tesla T4", None),
    ("NVIDIA A10G", None),
])
def test_each_driver_name_has_exactly_its_row(name, row):
    assert match_gpu(name) == row
    if row is not None:
        assert row in HARDWARE and HARDWARE[row].kind == "gpu"


def test_an_a100_without_its_memory_in_the_name_is_told_apart_by_capacity():
    assert match_gpu("NVIDIA A100", mem_capacity=85e9) == "a100-80gb"
    assert match_gpu("NVIDIA A100", mem_capacity=42e9) == "a100-40gb"
    assert match_gpu("NVIDIA A100") is None


def test_the_variants_differ_where_their_datasheets_do():
    sxm, pcie, nvl = HARDWARE["h100-sxm"], HARDWARE["h100-pcie"], HARDWARE["h100-nvl"]
    assert sxm.peak("bf16") > nvl.peak("bf16") > pcie.peak("bf16") == pytest.approx(756.5e12)
    assert (sxm.mem_bandwidth, pcie.mem_bandwidth, nvl.mem_bandwidth) == (3.35e12, 2.0e12, 3.9e12)
    assert nvl.mem_capacity == 94e9
    l4, l40, l40s = HARDWARE["l4"], HARDWARE["l40"], HARDWARE["l40s"]
    assert l4.mem_capacity == 24e9 and l40.mem_capacity == l40s.mem_capacity == 48e9
    assert l40s.peak("bf16") == pytest.approx(2 * l40.peak("bf16"), rel=1e-3) and l40s.peak("bf16") > 2 * l4.peak("bf16")
