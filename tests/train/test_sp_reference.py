"""`parametrization = "sp"` trains bit for bit as the trainer did before parametrizations existed.

The curves in data/sp_reference_curves.json were recorded with the model, optimizer and trainer of commit
19add61 (before muP/CompleteP) by running this file as a script in a checkout of that commit:
`python tests/train/test_sp_reference.py`, which adds this machine's entry. Losses and gradient norms are
stored as float.hex(). The kernels oneDNN/MKL pick depend on the CPU (vendor, AVX-512, AMX), so float sums
differ in the last bits between CPUs: each CPU kernel signature has its own entry, compared exactly; on a
CPU without one the curves are compared to each recorded entry within 1e-5 (a real change of the numbers
is far larger), and the test says which signature to record.
"""

from __future__ import annotations

import json
import math
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


#: the /proc/cpuinfo flags that decide which matmul kernels run
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_signature() -> str:
    """'AuthenticAMD avx2 avx512f avx512_bf16': the CPU vendor and the kernel-deciding flags it has."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return " ".join([fields.get("vendor_id", "unknown"), *(f for f in KERNEL_FLAGS if f in flags)])


def references() -> dict[str, dict]:
    return json.loads(DATA.read_text())["machines"]


def assert_same(got: list[str], recorded: list[str], *, exact: bool, what: str) -> None:
    if exact:
        assert got == recorded, what
    else:
        assert len(got) == len(recorded) and all(
            math.isclose(float.fromhex(a), float.fromhex(b), rel_tol=1e-5) for a, b in zip(got, recorded)), what


def config_for(corpus: str, cache: str, **extra) -> TrainConfig:
    """The recorded runs stepped the foreach AdamW (the only one on CPU then): `adamw = "foreach"` is that run."""
    extra = {"adamw": "foreach", **extra}
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


def _expected() -> tuple[list[dict], bool]:
    """(the recorded entries to compare with, whether the comparison is exact on this CPU)."""
    machines = references()
    here = cpu_signature()
    return ([machines[here]], True) if here in machines else (list(machines.values()), False)


def test_sp_training_is_bit_identical_to_the_recorded_curves(tmp_path):
    entries, exact = _expected()
    got = curves(tmp_path)
    for expected in entries:
        assert set(got) == set(expected)
        for name in expected:
            for key in ("loss", "grad_norm", "val_loss"):
                assert_same(got[name][key], expected[name][key], exact=exact,
                            what=f"{name} {key} on {cpu_signature()}" + ("" if exact else " (no exact entry)"))
    assert len(got["default-L2-H32"]["loss"]) == 10


def test_the_recorded_entries_differ_only_in_the_last_bits():
    """Two CPUs' records of the same code agree within 1e-5: the tolerance used on an unrecorded CPU is
    what CPUs differ by, and far below what a change of the model or optimizer does."""
    machines = list(references().values())
    assert len(machines) >= 2
    for other in machines[1:]:
        for name, curves_ in machines[0].items():
            for key, values in curves_.items():
                assert_same(other[name][key], values, exact=False, what=f"{name} {key}")
    assert machines[0] != machines[1]  # and they are not bit-identical: hence one entry per CPU


@pytest.mark.parametrize("explicit", [{"parametrization": "sp"}, {"parametrization": "sp", "base_width": 16,
                                                                   "base_depth": 8}])
def test_sp_ignores_base_sizes(tmp_path, explicit):
    """SP has no multipliers: naming it, or base sizes with it, changes no number."""
    entries, exact = _expected()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_text())
    shape, _ = CASES["default-L2-H32"]
    r = train(shape, config_for(str(corpus), str(tmp_path / "cache"), **explicit))
    for expected in entries:
        assert_same([c["loss"].hex() for c in r.curve], expected["default-L2-H32"]["loss"], exact=exact,
                    what=f"loss on {cpu_signature()}")


def test_the_fused_adamw_is_the_recorded_update_in_another_float_order(tmp_path):
    """`adamw = "fused"` (the default) steps the same AdamW as the recorded foreach runs, in one kernel: its
    losses, gradient norms and final loss agree with the foreach run's to float rounding, not bit for bit."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_text())
    shape, _ = CASES["default-L2-H32"]
    runs = {k: train(shape, config_for(str(corpus), str(tmp_path / "cache"), adamw=k)) for k in ("foreach", "fused")}
    a, b = runs["foreach"], runs["fused"]
    assert config_for("c", "d").config_hash() != config_for("c", "d", adamw="fused").config_hash()
    for key in ("loss", "grad_norm"):
        for x, y in zip(a.curve, b.curve, strict=True):
            assert math.isclose(x[key], y[key], rel_tol=2e-5), (key, x[key], y[key])
    assert math.isclose(a.val_loss, b.val_loss, rel_tol=2e-5)


if __name__ == "__main__":  # record the reference (only with the pre-parametrization code)
    import tempfile

    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        data = curves(Path(d))
    stored = json.loads(DATA.read_text()) if DATA.is_file() else {"machines": {}}
    stored["machines"][cpu_signature()] = data
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(stored, indent=1) + "\n")
    for name, c in data.items():
        print(name, [round(float.fromhex(v), 4) for v in c["loss"]])
