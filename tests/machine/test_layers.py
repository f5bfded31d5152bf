"""The machine module sits below model, data, train and bench: of depthwidth it imports only errors,
files, shapes and itself, torch only inside functions, and the trainer's memory meters no longer
import bench."""

import ast
from pathlib import Path

import depthwidth

SRC = Path(depthwidth.__file__).parent
ABOVE = ("model", "data", "train", "bench", "study", "report", "cli", "present")


def _imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_machine_imports_only_stdlib_errors_shapes_and_torch_in_functions():
    files = sorted((SRC / "machine").glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "device.py", "paths.py", "profile.py", "measure.py",
                                      "peak.py", "resolve.py"}
    for path in files:
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "depthwidth":
                allowed = ("errors", "files", "shapes", "machine")
                assert len(parts) > 1 and parts[1] in allowed, f"{path.name} imports {name}"
                assert parts[1] not in ABOVE
        assert "torch" not in {n.split(".")[0] for n in _imports(path, top_level_only=True)}, path.name


def test_train_measure_keeps_only_the_memory_meters():
    path = SRC / "train" / "measure.py"
    assert not any(n.startswith("depthwidth.bench") for n in _imports(path))
    defined = {n.name for n in ast.parse(path.read_text()).body
               if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
    assert defined == {"SavedTensorMeter", "state_bytes", "peak_rss_bytes"}


def test_only_the_machine_module_names_the_profile_files_and_the_cache_folder():
    for path in SRC.rglob("*.py"):
        if path.parent.name == "machine":
            continue
        text = path.read_text()
        for needle in ('"hw-profile', "f\"hw-profile", 'environ.get("DEPTHWIDTH', 'environ["DEPTHWIDTH',
                       '/ ".cache"', '"~/.cache/depthwidth"'):
            assert needle not in text, f"{path.relative_to(SRC)} names {needle}"
