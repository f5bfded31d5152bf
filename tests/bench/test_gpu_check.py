"""benchmarks/gpu_check.py on the CPU: the sections that make sense run, the CUDA-only ones are listed
as skipped with their reason, and the JSON has every key a GPU run would fill."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_documents_every_section_with_its_expected_result(capsys) -> None:
    gpu_check = _module()
    try:
        gpu_check.main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    text = capsys.readouterr().out
    for name in gpu_check.SECTIONS:
        assert f"\n  {name} " in text, name
    assert text.count("Expected") >= len(gpu_check.SECTIONS)


def test_the_cpu_path_runs_what_it_can_and_says_what_it_skipped(tmp_path, monkeypatch) -> None:
    gpu_check = _module()
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "check.json"
    code = gpu_check.main(["--device", "cpu", "--quick", "--sections", "profile,sdpa,mfu,ray", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 0 and report["errors"] == {}
    assert set(report) == {"meta", "sections", "skipped", "errors", "seconds"}
    assert report["meta"]["device"] == "cpu" and report["meta"]["quick"] is True
    assert set(report["sections"]) == {"profile", "sdpa"}
    assert report["skipped"]["mfu"] == gpu_check.CUDA_ONLY["mfu"] and "ray" in report["skipped"]
    profile = report["sections"]["profile"]
    assert all(section["expected"] == gpu_check.EXPECTED[name] for name, section in report["sections"].items())
    assert profile["peak_flops"]["fp32"] > 0 and profile["table_row"] is None
    assert profile["timed_gemm"]["timer"] == "perf_counter" and profile["timed_gemm"]["flops_per_s"] > 0
    assert report["sections"]["sdpa"]["fp32"] and all(k.startswith("aten::") for k in report["sections"]["sdpa"]["fp32"])


def test_an_unknown_section_is_refused(capsys) -> None:
    gpu_check = _module()
    try:
        gpu_check.main(["--sections", "profile,warp"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "unknown section(s) warp" in capsys.readouterr().err
