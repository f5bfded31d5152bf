"""Checks of the data settings that a run's configuration validates before anything is read: the
tokenizer spec string and the split fractions. Standard library only (no numpy, no torch), so that
`TrainConfig` and the command line stay light."""

from __future__ import annotations

import re

from depthwidth.errors import UserError

TOKENIZER_KINDS = ("byte", "char", "bpe:N")
BPE_MIN_VOCAB = 257  # the 256 byte symbols plus at least one merge
MAX_VOCAB = 1 << 24


def parse_tokenizer_spec(spec: str) -> tuple[str, int | None]:
    """'byte' -> ('byte', None), 'char' -> ('char', None), 'bpe:8000' -> ('bpe', 8000)."""
    if spec in ("byte", "char"):
        return spec, None
    match = re.fullmatch(r"bpe:(\d+)", spec) if isinstance(spec, str) else None
    if match:
        n = int(match.group(1))
        if not BPE_MIN_VOCAB <= n <= MAX_VOCAB:
            raise UserError(f"tokenizer={spec!r}: the BPE vocabulary must be in [{BPE_MIN_VOCAB}, {MAX_VOCAB}]")
        return "bpe", n
    raise UserError(f"tokenizer={spec!r} is not known; expected one of byte, char, bpe:N (e.g. bpe:4096)")


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Validation and test tails of each slice: val in (0, 1), test in [0, 1), together below 0.5."""
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise UserError(f"{name}={value!r} must be a number in [0, 1)")
    if val_fraction <= 0:
        raise UserError(f"val_fraction={val_fraction!r} must be > 0 (validation loss is the measurement)")
    if val_fraction + test_fraction >= 0.5:
        raise UserError(
            f"val_fraction + test_fraction = {val_fraction + test_fraction:g} must be below 0.5 "
            "(most of the corpus is training text)"
        )


__all__ = ["BPE_MIN_VOCAB", "MAX_VOCAB", "TOKENIZER_KINDS", "check_fractions", "parse_tokenizer_spec"]
