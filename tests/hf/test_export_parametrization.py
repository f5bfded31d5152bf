"""A run trained under muP/CompleteP is not exported as if it were SP: its residual, logit and attention
multipliers live in the forward pass, not in the weights, so the export is refused in one line naming the
parametrization (and nothing is written)."""

from __future__ import annotations

import pytest

from depthwidth.errors import UserError
from depthwidth.hf.export import export_run
from depthwidth.shapes import Shape

pytest.importorskip("safetensors")


@pytest.mark.parametrize("name", ["completep", "mup"])
def test_a_non_sp_run_is_refused_naming_its_parametrization(tmp_path, corpus_file, trainer, name, cli_error):
    shape = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
    run = tmp_path / "run"
    result = trainer(run, shape, corpus=corpus_file, steps=2, parametrization=name, base_width=16, base_depth=1)
    assert result.status == "completed"
    with pytest.raises(UserError, match=f"parametrization='{name}' runs cannot be exported"):
        export_run(run, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    line = cli_error(["export", str(run), "-o", str(tmp_path / "hf2")])
    assert f"parametrization='{name}'" in line and not (tmp_path / "hf2").exists()
