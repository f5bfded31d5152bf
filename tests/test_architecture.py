"""The package's layers, checked from the source: every import statement of every module under
src/depthwidth (module level and inside functions, `import x` and `from x import y`, relative imports
resolved) is read with `ast`, and the test fails naming the file and line of

- an upward import: a module imports a layer above its own (LAYERS, lowest first; a module may import
  its own layer and below). The packages that read and write trained runs are layers of their own, in
  the order they may use each other: `artifact` (the run folder, checkpoint, recorded config, the model
  rebuilt from it) and `hfio` (a local Hugging Face folder: its format, read into our model), one layer,
  below `hf` (a run exported to a Hugging Face folder), below `train` (which may start from an HF
  folder), below `bench` (which measures through hfio and artifact);
- an import, either way, between two packages of one layer that are kept apart (APART: `artifact` and
  `hfio`, each read beside the other, never through it);
- a package missing from LAYERS (a new package has to be placed in a layer);
- an import in `shapes/` of anything but the standard library, `depthwidth.errors` and `depthwidth.shapes`;
- an import of a depthwidth module that does not exist;
- a cycle of imports between modules, whichever kind: at import time (module level, class bodies),
  inside functions, or under `if TYPE_CHECKING:`. A function-local import that closes a circle is still a
  circle in the design, only hidden from Python's import machinery. An edge goes to the module named
  (for `from p import n`, to `p.n` when that is a module, else to `p`); that importing `p.n` first runs
  `p/__init__.py` is not counted, as Python has `p` in sys.modules by then.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "depthwidth"
ROOT = Path(__file__).resolve().parents[1] / "src"  # what the modules' dotted names are relative to
SRC = ROOT / PACKAGE

#: Layer of each top-level module or package of depthwidth, lowest first. The top-level __init__ and
#: __main__ are outside the layers.
LAYERS = {
    "errors": 0,
    "files": 0,
    "lazy": 0,
    "serial": 0,
    "shapes": 1,
    "machine": 2,
    "hfconfig": 2,
    "model": 3,
    "data": 3,
    "artifact": 4,
    "hfio": 4,
    "hf": 5,
    "train": 6,
    "bench": 7,
    "diagnose": 7,
    "study": 8,
    "present": 9,
    "report": 10,
    "explore": 10,
    "cli": 11,
}
#: Packages of one layer that never import each other, either way.
APART = (frozenset({"artifact", "hfio"}),)
FREE = {"__init__", "__main__"}
SHAPES_MAY_IMPORT = ("depthwidth.errors", "depthwidth.serial", "depthwidth.shapes")


@dataclass(frozen=True, kw_only=True, slots=True)
class Import:
    """One imported module: `target` its dotted name, where it is, and whether it runs at import time."""

    source: str  # the importing module, e.g. "depthwidth.shapes.flops"
    path: Path
    line: int
    target: str
    import_time: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT.parent)}:{self.line}"


def module_name(path: Path, *, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, *, root: Path = ROOT) -> bool:
    """Whether `name` is a module or package of the source tree under `root`."""
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(node: ast.ImportFrom, *, source: str, is_package: bool) -> str:
    """The absolute module of `from <node.module> import ...`, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = source.split(".") if is_package else source.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, *, root: Path = ROOT, source: str | None = None, text: str | None = None) -> list[Import]:
    """Every module `path` imports, in source order (`text` instead of the file's contents, for tests)."""
    source = source or module_name(path, root=root)
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text, filename=str(path))
    out: list[Import] = []

    def add(node: ast.stmt, target: str, import_time: bool) -> None:
        out.append(Import(source=source, path=path, line=node.lineno, target=target, import_time=import_time))

    def visit(node: ast.AST, import_time: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            import_time = False
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, import_time)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name, import_time)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, source=source, is_package=path.name == "__init__.py")
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(node, sub if alias.name != "*" and is_module(sub, root=root) else base, import_time)
        for child in ast.iter_child_nodes(node):
            visit(child, import_time)

    visit(tree, True)
    return out


def all_imports() -> list[Import]:
    return [imp for path in sorted(SRC.rglob("*.py")) for imp in imports_of(path)]


def top(name: str) -> str | None:
    """'shapes' for 'depthwidth.shapes.flops'; None outside depthwidth; '__init__' for the package itself."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def layer_violations(imports: list[Import]) -> list[str]:
    out = []
    for imp in imports:
        src, dst = top(imp.source), top(imp.target)
        if dst is None or src in FREE or dst in FREE:
            continue
        for name, module in ((src, imp.source), (dst, imp.target)):
            if name not in LAYERS:
                out.append(f"{imp.where}: {module} is in no layer ({name!r} is missing from LAYERS)")
        if src not in LAYERS or dst not in LAYERS:
            continue
        if LAYERS[dst] > LAYERS[src]:
            out.append(f"{imp.where}: {imp.source} ({src}, layer {LAYERS[src]}) imports {imp.target} "
                       f"({dst}, layer {LAYERS[dst]}): an upward import")
        elif frozenset({src, dst}) in APART:
            out.append(f"{imp.where}: {imp.source} ({src}) imports {imp.target} ({dst}): {src} and {dst} are "
                       "kept apart")
    return out


def shapes_violations(imports: list[Import]) -> list[str]:
    out = []
    for imp in imports:
        if top(imp.source) != "shapes":
            continue
        stdlib = imp.target.split(".")[0] in sys.stdlib_module_names
        own = any(imp.target == p or imp.target.startswith(p + ".") for p in SHAPES_MAY_IMPORT)
        if not (stdlib or own):
            out.append(f"{imp.where}: {imp.source} imports {imp.target}; shapes/ imports only the standard "
                       "library, depthwidth.errors and depthwidth.shapes")
    return out


def import_cycles(imports: list[Import], *, import_time_only: bool = False) -> list[str]:
    """One line per strongly connected component of the import graph (every import, or with
    `import_time_only` those that run when the module is imported): one cycle through it, each edge with
    the file and line of its import."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if (imp.import_time or not import_time_only) and top(imp.target) is not None and imp.target != imp.source:
            edges.setdefault(imp.source, {}).setdefault(imp.target, imp)
    out = []
    for component in _strongly_connected(edges):
        if len(component) > 1:
            out.append("import cycle: " + _cycle_text(edges, component))
    return sorted(out)


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    nodes = set(edges) | {t for targets in edges.values() for t in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, {})))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _cycle_text(edges: dict[str, dict[str, Import]], component: set[str]) -> str:
    """The shortest cycle through the component's first module, as 'a (file:line) -> b ... -> a'."""
    first = min(component)
    previous: dict[str, str] = {}
    frontier = [first]
    while frontier and first not in previous:
        nxt = []
        for node in frontier:
            for child in sorted(edges.get(node, {})):
                if child in component and child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    path = [first]
    node = previous[first]
    while node != first:
        path.append(node)
        node = previous[node]
    path.append(first)
    path.reverse()  # first -> ... -> first
    hops = [f"{a} ({edges[a][b].where})" for a, b in zip(path, path[1:])]
    return " -> ".join(hops + [first])


def _report(kind: str, violations: list[str]) -> str:
    unique = list(dict.fromkeys(violations))  # `from p import a, b` may name one module twice
    return f"{len(unique)} {kind}:\n" + "\n".join(unique)


# ---- the rules on the real source -------------------------------------------------------------


def test_the_source_tree_is_found_and_read():
    imports = all_imports()
    flops = [i for i in imports if i.source == "depthwidth.shapes.flops" and i.target == "depthwidth.shapes.ops"]
    assert flops and flops[0].import_time
    assert len({i.source for i in imports}) > 50


def test_no_upward_imports_between_layers():
    violations = layer_violations(all_imports())
    assert not violations, _report("imports break the layers", violations)


def test_shapes_imports_only_the_standard_library():
    violations = shapes_violations(all_imports())
    assert not violations, _report("imports leave the standard library", violations)


def test_every_imported_depthwidth_module_exists():
    missing = [f"{i.where}: {i.source} imports {i.target}, which is no module of src/depthwidth"
               for i in all_imports() if top(i.target) is not None and not is_module(i.target)]
    assert not missing, _report("imports of missing modules", missing)


def test_no_import_cycles_of_any_kind():
    cycles = import_cycles(all_imports())
    assert not cycles, _report("import cycles (function-local imports included)", cycles)


def test_the_trained_run_layers_are_ordered_artifact_and_hfio_hf_train_bench():
    assert LAYERS["model"] == LAYERS["data"] < LAYERS["artifact"] == LAYERS["hfio"] < LAYERS["hf"] < \
        LAYERS["train"] < LAYERS["bench"] < LAYERS["study"]
    assert frozenset({"artifact", "hfio"}) in APART


# ---- the checker itself, on made-up modules ------------------------------------------------------


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_imports_are_resolved_and_placed(tmp_path):
    root = _fake_tree(tmp_path, {
        "depthwidth/__init__.py": "",
        "depthwidth/shapes/__init__.py": "",
        "depthwidth/shapes/flops.py": "",
        "depthwidth/shapes/ops.py": "",
        "depthwidth/errors.py": "",
        "depthwidth/model/__init__.py": "",
        "depthwidth/model/transformer.py": (
            "import os.path\n"
            "from . import cache\n"
            "from ..shapes import flops, Shape\n"
            "from .cache import KVCache\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from depthwidth.train import loop\n"
            "class A:\n"
            "    import depthwidth.errors\n"
            "def f():\n"
            "    from depthwidth.shapes.ops import QKV\n"
        ),
        "depthwidth/model/cache.py": "",
    })
    found = imports_of(root / "depthwidth/model/transformer.py", root=root)
    assert [(i.line, i.target, i.import_time) for i in found] == [
        (1, "os.path", True),
        (2, "depthwidth.model.cache", True),
        (3, "depthwidth.shapes.flops", True),
        (3, "depthwidth.shapes", True),  # Shape is a name in shapes/__init__, not a module
        (4, "depthwidth.model.cache", True),
        (5, "typing", True),
        (7, "depthwidth.train", False),
        (9, "depthwidth.errors", True),
        (11, "depthwidth.shapes.ops", False),
    ]
    assert {i.source for i in found} == {"depthwidth.model.transformer"}


def _imp(source: str, target: str, line: int = 1, import_time: bool = True) -> Import:
    return Import(source=source, path=SRC / "x.py", line=line, target=target, import_time=import_time)


def test_layer_rules():
    violations = layer_violations([
        _imp("depthwidth.shapes.flops", "depthwidth.model.transformer", 3),  # up
        _imp("depthwidth.train.loop", "depthwidth.bench.hw", 4, import_time=False),  # up, inside a function
        _imp("depthwidth.bench.target", "depthwidth.artifact.checkpoint", 5),  # down
        _imp("depthwidth.model.transformer", "depthwidth.data.batches", 6),  # same layer
        _imp("depthwidth.cli.plan", "depthwidth.shapes.families", 7),  # down
        _imp("depthwidth.__main__", "depthwidth.cli", 8),  # free
        _imp("depthwidth.plugins.x", "depthwidth.shapes", 9),  # unplaced package
        _imp("depthwidth.hfio.load", "depthwidth.artifact.load", 10, import_time=False),  # kept apart
    ])
    assert violations == [
        "src/depthwidth/x.py:3: depthwidth.shapes.flops (shapes, layer 1) imports depthwidth.model.transformer "
        "(model, layer 3): an upward import",
        "src/depthwidth/x.py:4: depthwidth.train.loop (train, layer 6) imports depthwidth.bench.hw (bench, layer 7): "
        "an upward import",
        "src/depthwidth/x.py:9: depthwidth.plugins.x is in no layer ('plugins' is missing from LAYERS)",
        "src/depthwidth/x.py:10: depthwidth.hfio.load (hfio) imports depthwidth.artifact.load (artifact): hfio and "
        "artifact are kept apart",
    ]


@pytest.mark.parametrize("importer, imported", [
    ("depthwidth.hf.export", "depthwidth.bench.target"),  # hf loading a checkpoint through bench
    ("depthwidth.hfio.weights", "depthwidth.train.loop"),  # the HF folder format borrowing from the trainer
    ("depthwidth.hfio.load", "depthwidth.hf.export"),  # the HF folder reader reaching into the export
    ("depthwidth.train.loop", "depthwidth.bench.serving"),  # the trainer measuring serving
    ("depthwidth.artifact.config", "depthwidth.train.optim"),  # the recorded config reaching into train
])
def test_an_upward_import_among_the_trained_run_layers_fails_the_real_tree(importer, imported):
    """The rule on the real source with one deliberately added function-local import: the checker names it."""
    _one_added_violation(importer, imported, ending="an upward import")


@pytest.mark.parametrize("importer, imported", [
    ("depthwidth.artifact.load", "depthwidth.hfio.load"),  # the run layer reading HF folders
    ("depthwidth.hfio.load", "depthwidth.artifact.load"),  # the HF folder reader loading a trained run
])
def test_artifact_and_hfio_importing_each_other_fails_the_real_tree(importer, imported):
    _one_added_violation(importer, imported, ending="are kept apart")


def _one_added_violation(importer: str, imported: str, *, ending: str) -> None:
    path = SRC.joinpath(*importer.split(".")[1:]).with_suffix(".py")
    text = path.read_text(encoding="utf-8") + f"\n\ndef _added():\n    import {imported}\n"
    added = imports_of(path, text=text)
    others = [i for i in all_imports() if i.source != importer]
    violations = layer_violations(others + added)
    assert len(violations) == 1 and f"{importer} (" in violations[0] and f"imports {imported} (" in violations[0] \
        and violations[0].endswith(ending), violations
    assert import_cycles(others + [i for i in imports_of(path)]) == []


def test_shapes_rule():
    violations = shapes_violations([
        _imp("depthwidth.shapes.a", "math"),
        _imp("depthwidth.shapes.a", "depthwidth.errors"),
        _imp("depthwidth.shapes.a", "depthwidth.shapes.ops"),
        _imp("depthwidth.shapes.a", "numpy", 2, import_time=False),
        _imp("depthwidth.shapes.a", "depthwidth.machine.peak", 3),
        _imp("depthwidth.model.a", "torch"),
    ])
    rule = "shapes/ imports only the standard library, depthwidth.errors and depthwidth.shapes"
    assert violations == [
        f"src/depthwidth/x.py:2: depthwidth.shapes.a imports numpy; {rule}",
        f"src/depthwidth/x.py:3: depthwidth.shapes.a imports depthwidth.machine.peak; {rule}",
    ]


def test_cycles_of_every_kind_of_import():
    imports = [
        _imp("depthwidth.a", "depthwidth.b", 1),
        _imp("depthwidth.b", "depthwidth.c", 2),
        _imp("depthwidth.c", "depthwidth.a", 3),
        _imp("depthwidth.d", "depthwidth.e", 4),
        _imp("depthwidth.e", "depthwidth.d", 5, import_time=False),  # inside a function: still a circle
        _imp("depthwidth.e", "depthwidth.e", 6),  # a module naming itself is no cycle
    ]
    abc = ("import cycle: depthwidth.a (src/depthwidth/x.py:1) -> depthwidth.b (src/depthwidth/x.py:2) -> "
           "depthwidth.c (src/depthwidth/x.py:3) -> depthwidth.a")
    de = "import cycle: depthwidth.d (src/depthwidth/x.py:4) -> depthwidth.e (src/depthwidth/x.py:5) -> depthwidth.d"
    assert import_cycles(imports) == [abc, de]
    assert import_cycles(imports, import_time_only=True) == [abc]


def test_a_function_local_circle_in_a_real_module_is_found():
    """trainer -> launcher at import time, launcher -> trainer inside a function: the checker names it."""
    path = SRC / "train" / "launch.py"
    text = path.read_text(encoding="utf-8") + "\n\ndef _added():\n    from depthwidth.train.loop import train\n"
    others = [i for i in all_imports() if i.source != "depthwidth.train.launch"]
    cycles = import_cycles(others + imports_of(path, text=text))
    assert len(cycles) == 1 and "depthwidth.train.launch (src/depthwidth/train/launch.py:" in cycles[0] \
        and "depthwidth.train.loop (src/depthwidth/train/loop.py:" in cycles[0], cycles
