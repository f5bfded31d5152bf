"""The hardware table: published numbers, validation, lookup by name."""

import dataclasses

import pytest

from depthwidth.shapes.hardware import DTYPES, HARDWARE, HardwareSpec, dtype_bytes, get_hardware

REQUIRED = ("h100-sxm", "h200", "a100-40gb", "a100-80gb", "l4", "rtx-4090", "mi300x", "cpu")


def test_required_rows_are_present():
    assert set(REQUIRED) <= set(HARDWARE)


@pytest.mark.parametrize("name", list(HARDWARE))
def test_every_row_is_complete(name):
    h = HARDWARE[name]
    assert h.source.strip() and h.label.strip()
    assert set(h.peak_flops) <= set(DTYPES) and "fp32" in h.peak_flops and "bf16" in h.peak_flops
    # matrix units: bf16 at least as fast as fp32; fp16 (where present) equals bf16 on all these parts
    assert h.peak("bf16") >= h.peak("fp32")
    if "fp16" in h.peak_flops:
        assert h.peak("fp16") == h.peak("bf16")
    assert h.mem_bandwidth > 0 and h.mem_capacity > 0
    assert 0 < h.flops_efficiency <= 1 and 0 < h.bandwidth_efficiency <= 1
    if h.kind == "gpu":
        assert h.link_bandwidth > 0 and h.op_overhead_s > 0


def test_published_datasheet_numbers():
    # NVIDIA datasheets, dense: H100 SXM bf16 989.4 TFLOP/s, 3.35 TB/s; H200 4.8 TB/s 141 GB; A100 bf16 312
    h100, h200 = HARDWARE["h100-sxm"], HARDWARE["h200"]
    assert h100.peak("bf16") == pytest.approx(989.4e12) and h100.peak("fp8") == pytest.approx(1978.9e12)
    assert h100.mem_bandwidth == 3.35e12 and h100.mem_capacity == 80e9
    assert h200.peak_flops == h100.peak_flops and h200.mem_bandwidth == 4.8e12 and h200.mem_capacity == 141e9
    assert HARDWARE["a100-80gb"].peak("bf16") == 312e12 and HARDWARE["a100-40gb"].mem_bandwidth == 1.555e12
    assert HARDWARE["mi300x"].peak("bf16") == 1307.4e12 and HARDWARE["mi300x"].mem_capacity == 192e9
    # NVLink 4: 900 GB/s bidirectional = 450 GB/s each way
    assert h100.link_bandwidth == 450e9
    # dense tf32 is half of dense bf16 on the data-centre parts
    for name in ("h100-sxm", "a100-80gb"):
        assert HARDWARE[name].peak("tf32") * 2 == pytest.approx(HARDWARE[name].peak("bf16"), rel=1e-3)


def test_ridge_point():
    h = HARDWARE["h100-sxm"]
    assert h.ridge_point("bf16") == pytest.approx(989.4e12 * 0.8 / (3.35e12 * 0.9))


@pytest.mark.parametrize("alias, name", [("H100", "h100-sxm"), ("a100", "a100-80gb"), ("RTX_4090", "rtx-4090"),
                                         ("4090", "rtx-4090"), (" MI300X ", "mi300x"), ("h200", "h200")])
def test_lookup_by_name_and_alias(alias, name):
    assert get_hardware(alias) is HARDWARE[name]


def test_unknown_name_lists_every_known_one():
    with pytest.raises(ValueError) as info:
        get_hardware("tpu-v9")
    message = str(info.value)
    assert "tpu-v9" in message
    for name in REQUIRED:
        assert name in message


def test_missing_dtype_names_supported_ones():
    with pytest.raises(ValueError, match="a100-80gb.* has no fp8.*fp32"):
        HARDWARE["a100-80gb"].peak("fp8")
    with pytest.raises(ValueError, match="fp64"):
        HARDWARE["h100-sxm"].peak("fp64")
    assert dtype_bytes("bf16") == 2 and dtype_bytes("tf32") == 4 and dtype_bytes("fp8") == 1


@pytest.mark.parametrize("change, field", [
    ({"kind": "tpu"}, "kind"), ({"peak_flops": {}}, "peak_flops"), ({"peak_flops": {"fp64": 1.0}}, "fp64"),
    ({"peak_flops": {"bf16": -1.0}}, "bf16"), ({"mem_bandwidth": 0}, "mem_bandwidth"),
    ({"flops_efficiency": 1.5}, "flops_efficiency"), ({"op_overhead_s": -1e-6}, "op_overhead_s"),
    ({"source": " "}, "source"), ({"train_mfu": 0}, "train_mfu"),
])
def test_validation_names_the_field(change, field):
    base = HARDWARE["l4"].to_dict()
    with pytest.raises(ValueError, match=field):
        HardwareSpec(**{**base, **change})


def test_round_trip_and_read_only_peaks():
    h = HARDWARE["mi300x"]
    assert HardwareSpec.from_dict(h.to_dict()) == h
    with pytest.raises(TypeError):
        h.peak_flops["bf16"] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.mem_bandwidth = 1.0
    with pytest.raises(ValueError, match="unknown hardware field"):
        HardwareSpec.from_dict({**h.to_dict(), "tdp": 750})
