"""Read a Hugging Face `config.json` from disk and turn it into a `Shape`.

The mapping itself is pure and lives in `depthwidth.shapes.hf.shape_from_hf_config`; this module
only does the file I/O (the analytic core `shapes/` never touches the filesystem).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.shapes.hf import shape_from_hf_config
from depthwidth.shapes.shape import Shape


def config_path(path: str | os.PathLike) -> Path:
    """`path` itself, or `path/config.json` when `path` is a folder."""
    p = Path(path)
    return p / "config.json" if p.is_dir() else p


def read_hf_config(path: str | os.PathLike) -> dict[str, Any]:
    """The parsed JSON object of `path` (a config.json, or a model folder holding one).

    Raises FileNotFoundError when absent, ValueError naming the file, line and column when the JSON
    is malformed or truncated, or when it is not a JSON object.
    """
    p = config_path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such config file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a JSON config") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise UserError(f"{p}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


def from_hf_config(config: dict[str, Any] | str | os.PathLike) -> Shape:
    """Shape of a Hugging Face config given as a dict, a config.json path or a model folder."""
    if isinstance(config, dict):
        return shape_from_hf_config(config)
    data = read_hf_config(config)
    return shape_from_hf_config(data, source=str(config_path(config)))


__all__ = ["config_path", "from_hf_config", "read_hf_config"]
