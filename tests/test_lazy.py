"""Packages that export their names lazily (`depthwidth.lazy`): every exported name resolves to the
object (never to a submodule of the same name), an unknown name is an AttributeError, and importing a
light submodule does not import torch or numpy."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

LAZY = ("depthwidth.data", "depthwidth.hf", "depthwidth.hfio", "depthwidth.model", "depthwidth.train")


@pytest.mark.parametrize("package", LAZY)
def test_every_export_resolves_to_its_object(package):
    pkg = importlib.import_module(package)
    for name in pkg.__all__:
        importlib.import_module(pkg._EXPORTS[name])  # the submodule loaded first: the name must still win
        value = getattr(pkg, name)
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is a module"
        assert value is getattr(importlib.import_module(pkg._EXPORTS[name]), name)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nothing_here'"):
        getattr(pkg, "nothing_here")


@pytest.mark.parametrize("module", ["depthwidth.artifact.config", "depthwidth.model.kernels", "depthwidth.data.specs",
                                    "depthwidth.cli.train", "depthwidth.study", "depthwidth.cli.study"])
def test_light_modules_stay_light(module):
    code = f"import sys, {module}; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
