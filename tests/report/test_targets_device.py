"""A report's latency for a target is measured only when the bench ran on that kind of device, and
says where it was measured. A target is a table row or "study" (the study's own machine), never
"measured" (the machine a command runs on)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from depthwidth.errors import UserError
from depthwidth.report.build import default_hardware
from depthwidth.report.targets import STUDY, estimate_target, hardware_label, measured_applies, resolve_target
from depthwidth.shapes.latency import predict_decode
from depthwidth.shapes.shape import Shape
from depthwidth.study.summary import ShapeResult

SHAPE = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=128)


def _result(**bench) -> ShapeResult:
    return ShapeResult(group="g", shape_label=SHAPE.label(), shape=SHAPE, params=1, non_embedding_params=1,
                       train_flops_per_token=1.0, lr_losses={}, best_lr=None, measured_decode_ms=0.5,
                       measured_prefill_ms=2.0, bench_context=64, bench_prompt_len=64, **bench)


def test_a_cpu_measurement_is_never_measured_for_a_gpu_row() -> None:
    # a result of before devices whose bench predicted for an H100 row measured on the CPU
    assert not measured_applies("h100-sxm", "h100-sxm", None)
    assert not measured_applies("h100-sxm", "h100-sxm", "cpu")
    assert measured_applies("h100-sxm", "h100-sxm", "cuda:0")
    assert not measured_applies("cpu", "measured-cuda", "cuda")
    assert measured_applies("cpu", "measured-cpu", "cpu") and measured_applies(STUDY, "measured-cpu", "cpu")
    old = _result(bench_hardware="h100-sxm")  # no bench_device: measured on the CPU
    t = estimate_target(old, hardware="h100", dtype="bf16")
    want = predict_decode(SHAPE, hardware="h100-sxm", batch=1, context=64, dtype="bf16").total_s * 1e3
    assert t.decode_source == "predicted for h100-sxm (eager)" and t.decode_ms == want and not t.decode_measured


def test_a_measurement_is_labelled_with_its_device() -> None:
    cpu = estimate_target(_result(bench_hardware="measured-cpu", bench_device="cpu"), hardware="study")
    assert cpu.decode_ms == 0.5 and cpu.decode_source == "measured on cpu (the study's machine)"
    assert cpu.hardware == "the study's machine" == hardware_label(STUDY)
    gpu = dataclasses.replace(_result(bench_hardware="h100-sxm", bench_device="cuda:1"))
    t = estimate_target(gpu, hardware="h100")
    assert t.prefill_ms == 2.0 and t.prefill_source == "measured on cuda:1 (the study's machine)"


def test_a_target_is_a_table_row_or_the_study(tmp_path) -> None:
    assert resolve_target("h100") == "h100-sxm" and resolve_target(" Study ") == STUDY == "study"
    assert resolve_target("cpu") == "cpu"
    profile = tmp_path / "p.json"
    profile.write_text("{}")
    with pytest.raises(UserError, match=r"a report's target is a row of `depthwidth hw list` or 'study' .*"
                                        r"not a profile file$"):
        resolve_target(str(profile))
    with pytest.raises(UserError, match=r"^--hardware: unknown hardware 'h900'.*; or 'study' \(the study's own"):
        resolve_target("h900", argument="--hardware")


def test_measured_is_refused_and_names_the_study() -> None:
    # "measured" is the machine a command runs on (`depthwidth.machine.resolve_hardware`); a report's
    # measurements are the study's, taken wherever it ran: the old spelling is one line naming "study"
    with pytest.raises(UserError) as info:
        resolve_target(" Measured ", argument="--hardware")
    message = str(info.value)
    assert message == ("--hardware ' Measured ' means this machine's profile, which is not a report target; use "
                       "--hardware study for the study's own measurements, or a row of `depthwidth hw list`")
    with pytest.raises(UserError, match="not a report target"):
        estimate_target(_result(bench_hardware="measured-cpu"), hardware="measured")


@pytest.mark.parametrize("stored,want", [
    ("measured", STUDY),  # a spec's "measured" is the machine the study ran on: its own measurements
    (None, STUDY), ("H100", "h100-sxm"), ("cpu", "cpu"), ("gone-gpu", STUDY), ("/some/profile.json", STUDY),
])
def test_a_reports_default_target_is_the_studys_hardware(stored, want) -> None:
    assert default_hardware(SimpleNamespace(protocol=SimpleNamespace(hardware=stored))) == want
