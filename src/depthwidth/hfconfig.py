"""Read a Hugging Face `config.json` from disk and turn it into a `Shape`.

The mapping itself is pure and lives in `depthwidth.shapes.hf.shape_from_hf_config`; this module
only does the file I/O (the analytic core `shapes/` never touches the filesystem).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from depthwidth.files import read_json_object
from depthwidth.shapes.hf import shape_from_hf_config
from depthwidth.shapes.shape import Shape


def config_path(path: str | os.PathLike) -> Path:
    """`path` itself, or `path/config.json` when `path` is a folder."""
    p = Path(path)
    return p / "config.json" if p.is_dir() else p


def read_hf_config(path: str | os.PathLike) -> dict[str, Any]:
    """The parsed JSON object of `path` (a config.json, or a model folder holding one).

    Raises FileNotFoundError when absent, UserError naming the file (and the line and column) when
    it is not a regular file, too large, not UTF-8, malformed or truncated JSON, or not a JSON object.
    """
    return read_json_object(config_path(path), what="config")


def from_hf_config(config: dict[str, Any] | str | os.PathLike) -> Shape:
    """Shape of a Hugging Face config given as a dict, a config.json path or a model folder."""
    if isinstance(config, dict):
        return shape_from_hf_config(config)
    data = read_hf_config(config)
    return shape_from_hf_config(data, source=str(config_path(config)))


__all__ = ["config_path", "from_hf_config", "read_hf_config"]
