"""Tokenizers named by a spec string: `byte`, `char`, `bpe:N`.

- `byte` (default): the UTF-8 bytes, vocabulary 256; nothing is learned, nothing is unknown.
- `char`: one id per character seen in the *training* split, sorted by code point, from id 1;
  id 0 (`UNK_ID`) is reserved for characters that occur only in validation/test text, so the
  vocabulary is 1 + the number of distinct training characters (66 for the classic 65-character
  Shakespeare set).
- `bpe:N`: a byte-level BPE of N tokens (Hugging Face `tokenizers`, `ByteLevelBPETokenizer`, the
  GPT-2 scheme of Radford et al. 2019) trained on the training split; byte-level, so no unknowns.
  Its JSON is cached with the token arrays, keyed by the corpus content hash.
"""

from __future__ import annotations

import hashlib

import numpy as np

from depthwidth.data.specs import parse_tokenizer_spec
from depthwidth.errors import UserError

UNK_ID = 0
#: BPE encodes in chunks of about this many characters, cut at line ends (deterministic).
_BPE_CHUNK_CHARS = 1 << 12


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.int32)


class ByteTokenizer:
    spec = "byte"
    vocab_size = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint16)

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def state(self) -> dict:
        return {"spec": self.spec}

    @property
    def fingerprint(self) -> str:
        return "byte"


class CharTokenizer:
    """Characters of the training split; `UNK_ID` (0) for anything else."""

    spec = "char"

    def __init__(self, chars: str) -> None:
        if len(set(chars)) != len(chars) or list(chars) != sorted(chars):
            raise UserError("char vocabulary must be distinct characters in code-point order")
        self.chars = chars
        self.vocab_size = len(chars) + 1
        codes = np.array([ord(c) for c in chars], dtype=np.int64)
        self._lookup = np.zeros(int(codes.max()) + 2 if len(codes) else 1, dtype=np.int64)
        self._lookup[codes] = np.arange(1, len(chars) + 1)

    @classmethod
    def train(cls, texts) -> CharTokenizer:
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        return cls("".join(sorted(seen)))

    def encode(self, text: str) -> np.ndarray:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int64)  # (N,)
        codes = np.where(codes < len(self._lookup), codes, len(self._lookup) - 1)  # last slot is UNK
        return self._lookup[codes].astype(token_dtype(self.vocab_size))

    def decode(self, ids) -> str:
        return "".join(self.chars[i - 1] if 0 < i <= len(self.chars) else "\ufffd" for i in map(int, ids))

    def state(self) -> dict:
        return {"spec": self.spec, "chars": self.chars}

    @property
    def fingerprint(self) -> str:
        return "char:" + hashlib.sha256(self.chars.encode("utf-8")).hexdigest()[:16]


class BPETokenizer:
    """Byte-level BPE from Hugging Face `tokenizers`."""

    def __init__(self, tokenizer_json: str, *, requested: int) -> None:
        from tokenizers import Tokenizer

        self._json = tokenizer_json
        self._tok = Tokenizer.from_str(tokenizer_json)
        self.requested = requested
        self.spec = f"bpe:{requested}"
        self.vocab_size = self._tok.get_vocab_size()

    @classmethod
    def train(cls, texts, *, vocab_size: int) -> BPETokenizer:
        from tokenizers import ByteLevelBPETokenizer

        tok = ByteLevelBPETokenizer()
        chunks = [c for text in texts for c in _chunks(text)]
        tok.train_from_iterator(chunks, vocab_size=vocab_size, min_frequency=2, show_progress=False, special_tokens=[])
        return cls(tok._tokenizer.to_str(), requested=vocab_size)

    def encode(self, text: str) -> np.ndarray:
        chunks = _chunks(text)
        ids = [np.asarray(e.ids, dtype=np.int64) for e in self._tok.encode_batch(chunks)] if chunks else []
        out = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        return out.astype(token_dtype(self.vocab_size))

    def decode(self, ids) -> str:
        return self._tok.decode([int(i) for i in ids])

    def state(self) -> dict:
        return {"spec": self.spec, "json": self._json}

    @property
    def fingerprint(self) -> str:
        return f"{self.spec}:" + hashlib.sha256(self._json.encode("utf-8")).hexdigest()[:16]


Tokenizer = ByteTokenizer | CharTokenizer | BPETokenizer


def _chunks(text: str) -> list[str]:
    """Cut `text` after a newline roughly every `_BPE_CHUNK_CHARS` characters."""
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + _BPE_CHUNK_CHARS)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def train_tokenizer(spec: str, train_texts) -> Tokenizer:
    """Build the tokenizer `spec` from the training texts (byte needs none)."""
    kind, n = parse_tokenizer_spec(spec)
    if kind == "byte":
        return ByteTokenizer()
    if kind == "char":
        return CharTokenizer.train(train_texts)
    return BPETokenizer.train(train_texts, vocab_size=n)


def tokenizer_from_state(state: dict) -> Tokenizer:
    kind, n = parse_tokenizer_spec(state["spec"])
    if kind == "byte":
        return ByteTokenizer()
    if kind == "char":
        return CharTokenizer(state["chars"])
    return BPETokenizer(state["json"], requested=n)
