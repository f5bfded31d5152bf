"""`parametrization = "sp"` trains bit for bit as the trainer did before parametrizations existed.

The curves in data/sp_reference_curves.json were recorded with the model, optimizer and trainer of commit
19add61 (before muP/CompleteP) by running this file as a script: `python tests/train/test_sp_reference.py`.
Losses and gradient norms are stored as float.hex(), so the comparison is exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig, train

DATA = Path(__file__).parent / "data" / "sp_reference_curves.json"
WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly hex bad jugglers".split()

#: name -> (shape, extra config): the default conventions (learned positions, tied head, GELU, LayerNorm,
#: sdpa) and the other branch of every option the parametrizations touch (RoPE, RMSNorm, SwiGLU, biases,
#: GQA, an untied head, eager attention, parallel residual).
CASES = {
    "default-L2-H32": (Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32), {}),
    "rope-swiglu-untied-eager-L3-H32": (
        Shape(n_layers=3, d_model=32, n_heads=4, n_kv_heads=2, vocab_size=256, max_seq_len=32, pos="rope",
              norm="rmsnorm", ffn="swiglu", bias="all", tie_embeddings=False, parallel_residual=True),
        {"attn_impl": "eager", "weight_decay": 0.05}),
}


def make_text(n_words: int = 4000) -> str:
    """Deterministic pseudo-English (a fixed linear congruential walk over WORDS)."""
    out, x = [], 12345
    for i in range(n_words):
        x = (1103515245 * x + 12345) % 2**31
        out.append(WORDS[x % len(WORDS)] + ("\n" if i % 11 == 10 else " "))
    return "".join(out)


def config_for(corpus: str, cache: str, **extra) -> TrainConfig:
    return TrainConfig(corpus=corpus, seq_len=32, batch_size=4, steps=10, threads=1, eval_windows=8, cache_dir=cache,
                       peak_flops=1e11, dtype="fp32", device="cpu", warmup=2, lr=3e-3, **extra)


def curves(tmp: Path) -> dict[str, dict[str, list[str]]]:
    corpus = tmp / "corpus.txt"
    corpus.write_text(make_text())
    out = {}
    for name, (shape, extra) in CASES.items():
        r = train(shape, config_for(str(corpus), str(tmp / "cache"), **extra))
        assert r.status == "completed", r.status
        out[name] = {"loss": [c["loss"].hex() for c in r.curve], "grad_norm": [c["grad_norm"].hex() for c in r.curve],
                     "val_loss": [r.val_loss.hex()]}
    return out


def test_sp_training_is_bit_identical_to_the_recorded_curves(tmp_path):
    expected = json.loads(DATA.read_text())
    got = curves(tmp_path)
    assert set(got) == set(expected)
    for name in expected:
        for key in ("loss", "grad_norm", "val_loss"):
            assert got[name][key] == expected[name][key], (name, key)
    assert len(got["default-L2-H32"]["loss"]) == 10


@pytest.mark.parametrize("explicit", [{"parametrization": "sp"}, {"parametrization": "sp", "base_width": 16,
                                                                   "base_depth": 8}])
def test_sp_ignores_base_sizes(tmp_path, explicit):
    """SP has no multipliers: naming it, or base sizes with it, changes no number."""
    expected = json.loads(DATA.read_text())["default-L2-H32"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_text())
    shape, _ = CASES["default-L2-H32"]
    r = train(shape, config_for(str(corpus), str(tmp_path / "cache"), **explicit))
    assert [c["loss"].hex() for c in r.curve] == expected["loss"]


if __name__ == "__main__":  # record the reference (only with the pre-parametrization code)
    import tempfile

    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        data = curves(Path(d))
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(data, indent=1) + "\n")
    for name, c in data.items():
        print(name, [round(float.fromhex(v), 4) for v in c["loss"]])
