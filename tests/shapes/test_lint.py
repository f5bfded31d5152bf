"""Lint: each rule fires on a shape that breaks it, says the fix, and stays quiet on a clean shape."""

import pytest

from depthwidth.shapes.lint import lint
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape

CLEAN = Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50304)


def codes(findings):
    return [(f.code, f.field) for f in findings]


def test_clean_shape_has_no_findings():
    assert lint(CLEAN) == []
    assert lint(CLEAN, tp=4, pp=3, hardware="h100") == []


def test_gpt2_vocab_is_padded_to_a_multiple_of_64():
    (finding,) = lint(CLEAN.with_(vocab_size=50257))
    assert (finding.code, finding.field) == ("DW001", "vocab_size")
    assert finding.fix == "pad vocab 50257 -> 50304"


def test_width_and_d_ff_multiples():
    findings = lint(Shape(n_layers=2, d_model=720, n_heads=12, d_ff=3000, vocab_size=50304))
    fixes = {f.field: f.fix for f in findings if f.code == "DW001"}
    assert fixes == {"d_model": "use d_model 704 or 768", "d_ff": "use d_ff 2944 or 3008"}


def test_head_dim_rules():
    (error,) = [f for f in lint(Shape(n_layers=2, d_model=768, n_heads=12, head_dim=60, vocab_size=50304))
                if f.code == "DW002"]
    assert error.severity == "error" and "multiple of 8" in error.message
    (warning,) = [f for f in lint(CLEAN.with_(n_heads=24)) if f.code == "DW002"]  # head_dim 32
    assert warning.severity == "warning" and warning.fix == "use n_heads 12 (head_dim 64) or 6 (head_dim 128)"
    assert not [f for f in lint(CLEAN.with_(n_heads=6)) if f.code == "DW002"]  # head_dim 128


def test_tensor_parallel_divisibility():
    findings = lint(CLEAN, tp=8)
    assert codes(findings) == [("DW003", "n_heads"), ("DW003", "n_kv_heads")]  # d_ff 3072, vocab 50304 split
    assert findings[0].fix == "use tp in {1, 2, 3, 4, 6, 12} or n_heads 8 or 16"
    assert lint(CLEAN, tp=3) == []
    assert ("DW003", "vocab_size") in codes(lint(CLEAN, tp=5))
    # fewer kv heads than ranks is fine when tp is a multiple of them (each kv head is replicated)
    assert lint(PRESETS["mistral-7b"].shape, tp=16) == []  # 32 heads, 8 kv heads
    assert codes(lint(CLEAN.with_(n_kv_heads=4), tp=6)) == [("DW003", "n_kv_heads")]


def test_pipeline_divisibility():
    (finding,) = lint(CLEAN.with_(n_layers=26), pp=4)
    assert finding.code == "DW004" and finding.fix == "use n_layers 24 or 28 or pp in {1, 2, 13, 26}"


def test_quantization_group_size():
    findings = [f for f in lint(Shape(n_layers=2, d_model=448, n_heads=7, vocab_size=50304)) if f.code == "DW005"]
    assert [f.field for f in findings] == ["d_model"]  # d_ff 1792 = 14 x 128 is fine
    assert "use d_model 384 or 512" in findings[0].fix
    assert not [f for f in lint(Shape(n_layers=2, d_model=448, n_heads=7, vocab_size=50304), group_size=64)
                if f.code == "DW005"]


def test_weights_that_do_not_fit_the_devices():
    big = PRESETS["llama-2-70b"].shape
    (finding,) = [f for f in lint(big, hardware="l4") if f.code == "DW006"]
    assert finding.severity == "error" and finding.fix.startswith("use tp*pp >= ")
    assert not [f for f in lint(big, hardware="h100", tp=8) if f.code == "DW006"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="tp"):
        lint(CLEAN, tp=0)
    with pytest.raises(ValueError, match="known"):
        lint(CLEAN, hardware="abacus")
    assert str(lint(CLEAN.with_(vocab_size=50257))[0]).startswith("DW001 vocab_size 50257")
