"""`depthwidth.shapes` uses the standard library only: every module imports with torch, numpy and
matplotlib blocked, and none of them opens files or prints while being imported and used."""

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import depthwidth.shapes

BLOCKED = ("torch", "numpy", "matplotlib", "scipy", "rich")

SCRIPT = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys

    BLOCKED = {blocked!r}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"shapes must not import {{name}}")
            return None

    sys.meta_path.insert(0, Block())
    import depthwidth.shapes as pkg
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__))
    for name in names:
        importlib.import_module(f"depthwidth.shapes.{{name}}")
    # exercise the public functions a little: they must not need anything blocked either
    from depthwidth.shapes.params import count_params
    from depthwidth.shapes.presets import PRESETS
    from depthwidth.shapes.hf import shape_from_hf_config
    from depthwidth.shapes.shape_string import parse_shape_string
    total = sum(count_params(p.shape).total for p in PRESETS.values())
    parse_shape_string("L2-H64-A4")
    shape_from_hf_config({{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2,
                           "vocab_size": 10, "n_positions": 4}})
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    sys.stdout.write(json.dumps({{"modules": names, "loaded": loaded}}))
    """
)


def test_shapes_import_without_torch_numpy():
    code = SCRIPT.format(blocked=BLOCKED)
    env = {**os.environ, "PYTHONPATH": str(Path(depthwidth.shapes.__file__).parents[2])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["loaded"] == []
    # the modules this test guards really were imported
    for name in ("shape", "params", "presets", "hf", "shape_string"):
        assert name in report["modules"]


def test_shapes_sources_do_no_io():
    """No open()/print()/input() calls; no os, io, pathlib, shutil, subprocess, tempfile, socket, urllib."""
    root = Path(depthwidth.shapes.__file__).parent
    banned_calls = {"open", "print", "input"}
    banned_modules = {"os", "io", "pathlib", "shutil", "subprocess", "tempfile", "socket", "urllib"}
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in banned_calls, f"{path.name}:{node.lineno} calls {node.func.id}()"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name.split(".")[0] not in banned_modules, f"{path.name} imports {alias.name}"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in banned_modules, f"{path.name} imports {node.module}"
