"""Corpus -> train / validation / test token arrays, cached on disk.

Split rule (`SPLIT_RULE`): each slice's text is cut contiguously - the first
(1 - val_fraction - test_fraction) of its characters are training text, the next val_fraction
validation, the last test_fraction test - so every slice of a mixture is split on its own and the
held-out text is a contiguous tail that the model never saw. Tokenizers are trained on the training
text only. Each split is the slices' token arrays concatenated in slice order; `SliceInfo` keeps
where each slice lies.

Cache: `<cache_dir>/tokens/<key>/` holds train.bin / val.bin / test.bin (raw uint16 or int32,
opened as np.memmap) and meta.json (written last; a folder without it is never used). The key is
sha256 over (format, corpus content hash, tokenizer spec, fractions). The folder is built under a
temporary name and renamed into place, so a killed build leaves nothing that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from depthwidth.data.corpora import Corpus, load_corpus
from depthwidth.data.specs import check_fractions, parse_tokenizer_spec
from depthwidth.data.tokenizers import (
    UNK_ID,
    CharTokenizer,
    Tokenizer,
    token_dtype,
    tokenizer_from_state,
    train_tokenizer,
)
from depthwidth.errors import UserError

CACHE_FORMAT = "depthwidth-tokens-v1"
SPLITS = ("train", "val", "test")
SPLIT_RULE = "contiguous per slice: train head, then validation, then test tail (by characters)"


@dataclass(frozen=True, kw_only=True, slots=True)
class SliceInfo:
    """Where one corpus slice lies in each split's token array: [start, end)."""

    name: str
    kind: str
    train: tuple[int, int]
    val: tuple[int, int]
    test: tuple[int, int]

    def span(self, split: str) -> tuple[int, int]:
        return getattr(self, split)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "train": list(self.train), "val": list(self.val),
                "test": list(self.test)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Dataset:
    """Tokenized splits of one corpus under one tokenizer."""

    corpus_spec: str
    corpus_hash: str
    tokenizer: Tokenizer
    val_fraction: float
    test_fraction: float
    slices: tuple[SliceInfo, ...]
    train: np.ndarray  # (N_train,) token ids
    val: np.ndarray  # (N_val,)
    test: np.ndarray  # (N_test,)
    cache_path: str
    #: tokens of each split that the tokenizer could not represent (char: UNK_ID; byte/BPE: none)
    unknown_tokens: dict[str, int] = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def split_rule(self) -> str:
        return SPLIT_RULE

    @property
    def dataset_hash(self) -> str:
        """sha256 of what determines every token: corpus content, tokenizer (and its learned
        vocabulary), split fractions and rule."""
        key = json.dumps([CACHE_FORMAT, self.corpus_hash, self.tokenizer.fingerprint, self.val_fraction,
                          self.test_fraction, SPLIT_RULE])
        return hashlib.sha256(key.encode()).hexdigest()

    def split(self, name: str) -> np.ndarray:
        if name not in SPLITS:
            raise UserError(f"split={name!r} is not allowed; expected one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def to_dict(self) -> dict:
        return {
            "corpus": self.corpus_spec,
            "corpus_hash": self.corpus_hash,
            "dataset_hash": self.dataset_hash,
            "tokenizer": self.tokenizer.spec,
            "tokenizer_fingerprint": self.tokenizer.fingerprint,
            "vocab_size": self.vocab_size,
            "val_fraction": self.val_fraction,
            "test_fraction": self.test_fraction,
            "split_rule": SPLIT_RULE,
            "tokens": {s: int(len(self.split(s))) for s in SPLITS},
            "slices": [s.to_dict() for s in self.slices],
            "unknown_tokens": dict(self.unknown_tokens),
        }


def split_text(text: str, *, val_fraction: float, test_fraction: float) -> tuple[str, str, str]:
    """The split rule on one slice's text (see module docstring)."""
    n = len(text)
    n_test = math.floor(n * test_fraction)
    n_val = math.floor(n * val_fraction)
    n_train = n - n_val - n_test
    return text[:n_train], text[n_train : n_train + n_val], text[n_train + n_val :]


def cache_key(*, corpus_hash: str, tokenizer: str, val_fraction: float, test_fraction: float) -> str:
    key = json.dumps([CACHE_FORMAT, corpus_hash, tokenizer, float(val_fraction), float(test_fraction), SPLIT_RULE])
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def load_dataset(
    *,
    corpus: str | os.PathLike | Corpus,
    tokenizer: str = "byte",
    val_fraction: float = 0.1,
    test_fraction: float = 0.0,
    cache_dir: str | os.PathLike | None = None,
) -> Dataset:
    """Read, split, tokenize (or reuse the cache) and memory-map a corpus."""
    parse_tokenizer_spec(tokenizer)
    check_fractions(val_fraction, test_fraction)
    corpus = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    from depthwidth.machine import cache_dir as machine_cache_dir

    root = machine_cache_dir(cache_dir) / "tokens"
    key = cache_key(corpus_hash=corpus.sha256, tokenizer=tokenizer, val_fraction=val_fraction,
                    test_fraction=test_fraction)
    folder = root / key
    if not (folder / "meta.json").is_file():
        _build(corpus, tokenizer=tokenizer, val_fraction=val_fraction, test_fraction=test_fraction,
               root=root, folder=folder)
    return _open(folder, corpus=corpus, val_fraction=val_fraction, test_fraction=test_fraction)


def _build(corpus: Corpus, *, tokenizer: str, val_fraction: float, test_fraction: float, root: Path,
           folder: Path) -> None:
    parts = [split_text(s.text, val_fraction=val_fraction, test_fraction=test_fraction) for s in corpus.slices]
    tok = train_tokenizer(tokenizer, [p[0] for p in parts])
    dtype = token_dtype(tok.vocab_size)
    unknown = dict.fromkeys(SPLITS, 0)
    arrays = {split: [] for split in SPLITS}
    slices = []
    offsets = dict.fromkeys(SPLITS, 0)
    for s, texts in zip(corpus.slices, parts):
        spans = {}
        for split, text in zip(SPLITS, texts):
            ids = tok.encode(text).astype(dtype)
            if isinstance(tok, CharTokenizer):
                unknown[split] += int(np.count_nonzero(ids == UNK_ID))
            arrays[split].append(ids)
            spans[split] = [offsets[split], offsets[split] + len(ids)]
            offsets[split] += len(ids)
        slices.append({"name": s.name, "kind": s.kind, **spans})
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        for split in SPLITS:
            data = np.concatenate(arrays[split]) if arrays[split] else np.zeros(0, dtype=dtype)
            data.astype(dtype).tofile(tmp / f"{split}.bin")
        meta = {
            "format": CACHE_FORMAT,
            "corpus_hash": corpus.sha256,
            "corpus": corpus.to_dict(),
            "tokenizer": tok.state(),
            "dtype": dtype.name,
            "lengths": {split: offsets[split] for split in SPLITS},
            "slices": slices,
            "unknown_tokens": unknown,
        }
        (tmp / "meta.json").write_text(json.dumps(meta, ensure_ascii=False))
        if folder.exists() and not (folder / "meta.json").is_file():
            shutil.rmtree(folder)  # an incomplete folder (never made by this code): rebuild it
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished the same folder first: keep theirs
            if not (folder / "meta.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _open(folder: Path, *, corpus: Corpus, val_fraction: float, test_fraction: float) -> Dataset:
    meta = json.loads((folder / "meta.json").read_text())
    if meta.get("format") != CACHE_FORMAT or meta.get("corpus_hash") != corpus.sha256:
        raise UserError(f"token cache {folder} does not match corpus {corpus.spec!r}; delete that folder")
    dtype = np.dtype(meta["dtype"])
    arrays = {}
    for split in SPLITS:
        n = int(meta["lengths"][split])
        path = folder / f"{split}.bin"
        if path.stat().st_size != n * dtype.itemsize:
            raise UserError(f"token cache file {path} has the wrong size; delete {folder}")
        arrays[split] = np.memmap(path, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype=dtype)
    slices = tuple(
        SliceInfo(name=s["name"], kind=s["kind"], train=tuple(s["train"]), val=tuple(s["val"]),
                  test=tuple(s["test"]))
        for s in meta["slices"]
    )
    return Dataset(
        corpus_spec=corpus.spec,
        corpus_hash=corpus.sha256,
        tokenizer=tokenizer_from_state(meta["tokenizer"]),
        val_fraction=float(val_fraction),
        test_fraction=float(test_fraction),
        slices=slices,
        train=arrays["train"],
        val=arrays["val"],
        test=arrays["test"],
        cache_path=str(folder),
        unknown_tokens={k: int(v) for k, v in meta.get("unknown_tokens", {}).items()},
    )
