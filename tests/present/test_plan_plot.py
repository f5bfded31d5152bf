"""The plan's trade-off picture: three panels to PNG or SVG, for equal parameters and equal compute."""

import pytest

from depthwidth.errors import UserError
from depthwidth.present.plan_plot import plot_plan
from depthwidth.shapes.evaluate import Workload, plan
from depthwidth.shapes.shape import Shape

BASE = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=256, max_seq_len=128)


def test_iso_compute_family_draws_three_panels(tmp_path):
    result = plan(hardware="cpu", workload=Workload(seq_len=128), base=BASE, train_flops=1e15, tokens_per_param=20,
                  align=16, head_dim=16, count=4)
    png = plot_plan(result, tmp_path / "family.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    svg = plot_plan(result, tmp_path / "nested" / "family.svg").read_text()
    assert svg.lstrip().startswith(("<?xml", "<svg"))
    for text in ("1 PFLOP training compute, 20 tokens/param", "Equal budget", "Deep-narrow", "Latency versus memory"):
        assert text in svg or text.replace(" ", "") in svg.replace(" ", ""), text


def test_an_unknown_suffix_is_a_user_error(tmp_path):
    result = plan(hardware="cpu", workload=Workload(seq_len=128), base=BASE, params=1e6, align=16, head_dim=16)
    with pytest.raises(UserError, match=r"must end in \.png, \.svg or \.pdf"):
        plot_plan(result, tmp_path / "family.jpg")
