"""Compact shape strings, the inverse of `Shape.label()`.

    "L12-H768-A12"               12 layers, width 768, 12 heads
    "L24-H2048-A16-KV4-F5632"    plus 4 key/value heads and d_ff 5632
    "L24-H2048-A24-D128"         plus head_dim 128 (when n_heads * head_dim != d_model)

Tokens are separated by '-', in any order, case-insensitive: L (n_layers), H (d_model), A (n_heads)
are required; KV (n_kv_heads, default n_heads), F (d_ff, default for the base's ffn) and D (head_dim,
default d_model // n_heads) are optional. Everything else (vocabulary, norm, positions, biases...)
comes from `base`, so `parse_shape_string(s.label(), base=s) == s` for any shape without a
head_dim override.
"""

from __future__ import annotations

import re

from depthwidth.errors import UserError
from depthwidth.shapes.shape import Shape

#: Conventions used when no base is given: Shape's defaults (pre-norm, GELU, LayerNorm without
#: biases, 1024 learned positions, tied head: nanoGPT bias=False) with the GPT-2 vocabulary.
DEFAULT_BASE = Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=50257)

_TOKEN = re.compile(r"^(KV|L|H|A|F|D)(\d+)$", re.IGNORECASE)
_FIELDS = {"L": "n_layers", "H": "d_model", "A": "n_heads", "KV": "n_kv_heads", "F": "d_ff", "D": "head_dim"}
_FORMAT = "L<layers>-H<width>-A<heads>[-KV<kv heads>][-F<d_ff>][-D<head_dim>], e.g. L12-H768-A12"


def parse_shape_string(text: str, *, base: Shape | None = None) -> Shape:
    """The Shape named by `text` (see the module docstring), other fields taken from `base`.

    Raises ValueError naming the offending token and the expected format.
    """
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"shape string {text!r} is empty; expected {_FORMAT}")
    sizes: dict[str, int] = {}
    for token in text.strip().split("-"):
        match = _TOKEN.match(token.strip())
        if not match:
            raise UserError(f"shape string {text!r}: cannot read token {token!r}; expected {_FORMAT}")
        key, value = match.group(1).upper(), int(match.group(2))
        field = _FIELDS[key]
        if field in sizes:
            raise UserError(f"shape string {text!r}: {key} is given twice")
        if value <= 0:
            raise UserError(f"shape string {text!r}: {key}{value} must be a positive integer")
        sizes[field] = value
    missing = [k for k in ("L", "H", "A") if _FIELDS[k] not in sizes]
    if missing:
        raise UserError(f"shape string {text!r} lacks {', '.join(missing)}; expected {_FORMAT}")
    fields = (base or DEFAULT_BASE).to_dict()
    fields.update(n_kv_heads=None, d_ff=None, head_dim=None)
    fields.update(sizes)
    return Shape(**fields)


__all__ = ["DEFAULT_BASE", "parse_shape_string"]
