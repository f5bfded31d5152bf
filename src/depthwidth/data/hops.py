"""Hop-k induction (Sanford, Hsu & Telgarsky 2024, "Transformers, parallel computation, and logarithmic
depth", arXiv 2402.09268, section 5 and appendix G): a target at every position, fresh sequences every step.

Definition. A sequence s_0 .. s_{n-1} over an alphabet of `ALPHABET` letters in which no letter follows
itself (s_i != s_{i-1}). For a position p let prev(p) be the last position q < p with s_q = s_p. The hop
pointers of position i are

    p_0 = i,   p_{j+1} = prev(p_j) + 1,

so p_1 is the position just after the previous occurrence of s_i (what an induction head copies), and
the k-hop target of i is s_{p_k}, or `NONE` when some prev() does not exist. Since no letter follows
itself, p_{j+1} < p_j: every hop moves strictly back. One hop is an induction head; k hops need depth
of order log k (the paper proves log k layers necessary and sufficient, and its trained models show it).

Layout: dense targets (rather than an interleaved layout with a loss mask, which would halve the context
and show the model earlier answers). A row of T tokens is

    inputs  [key(k), s_0, s_1, ..., s_{T-2}]
    targets [IGNORE, t_0, t_1, ..., t_{T-2}]        t_i = the k-hop target of position i

so the target at each position is about the letter at that position (not the next token), and the first
position, which names k, has no target (`IGNORE`, the index torch's cross-entropy skips). Natural-text
rows in the same batch keep next-token targets.

Sampling. Training rows are fresh every step: a counter-based Philox generator keyed by (the probe's
canonical spec, the run's seed, the step) draws each row's k (uniform over the train difficulties) and
its letters (s_0 uniform, then each next letter uniform over the other ALPHABET - 1), so batches stay a
pure function of (spec, seed, step) and a resumed run needs only the step number. Held-out rows are
fixed per (spec, split, k) and shared by every run and seed: "val" rows for the validation loss, "test"
rows for the token error by k. Token error counts every scored position of a row, `NONE` targets
included (the reference code's metric, chsanford/hop-induction-heads, less its trivial first position).

As text (`examples_text`: the probe's corpus slice and `depthwidth probe show`) a sequence is the k token
and TEXT_LENGTH letters, then its targets; in the corpus that text only sets the probe's share of training
rows (`depthwidth.data.batches`). Defaults follow the reference runs: 4 letters; the paper trains
k = 0..16 at sequence length 100, where here a row is as long as the run's seq_len.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from depthwidth.errors import UserError

ALPHABET = "abcd"
NONE = "~"  # the target of a position whose hop chain runs off the start of the sequence
KEY_CHARS = "0123456789ABCDEFG"  # the token naming k, for k = 0..16
MAX_K = len(KEY_CHARS) - 1
FORMAT = "depthwidth-hops-v1"  # the generator's version, in the batch-stream hash of a run that uses it
IGNORE = -100  # a target no loss or error counts (torch.nn.functional.cross_entropy's ignore_index)
TEXT_LENGTH = 64  # letters per example where a sequence is written as text (the corpus, `probe show`)
_NONE_INDEX = len(ALPHABET)  # letters are 0..ALPHABET-1 in the arrays below; NONE is the next index
_SPLIT_KEYS = {"val": 1, "test": 2}
_TEXT_BLOCK = 256  # rows per generator where sequences are written as text
_LETTER_BYTES = np.frombuffer((ALPHABET + NONE).encode("ascii"), dtype=np.uint8)


def letters_text(letters) -> str:
    """Letter indices (NONE as `len(ALPHABET)`) as a string."""
    return _LETTER_BYTES[np.asarray(letters, dtype=np.int64)].tobytes().decode("ascii")


def hop_targets(letters: list[int], k: int) -> list[int]:
    """The k-hop target (a letter index, or `len(ALPHABET)` for NONE) of every position, straight from the
    definition in the module docstring: O(n k) walks back through the list, for reading and testing."""
    out = []
    for i in range(len(letters)):
        p = i
        for _ in range(k):
            q = next((j for j in range(p - 1, -1, -1) if letters[j] == letters[p]), None)
            if q is None:
                p = None
                break
            p = q + 1
        out.append(_NONE_INDEX if p is None else letters[p])
    return out


def random_letters(rng: np.random.Generator, rows: int, length: int) -> np.ndarray:
    """(rows, length) letter indices, uniform among sequences with no letter twice in a row."""
    a = len(ALPHABET)
    first = rng.integers(0, a, size=(rows, 1))  # (R, 1)
    steps = rng.integers(1, a, size=(rows, max(0, length - 1)))  # (R, L-1): a shift of 1..a-1, never 0
    return (np.cumsum(np.concatenate([first, steps], axis=1), axis=1) % a)[:, :length]  # (R, L)


def hop_target_array(letters: np.ndarray, k: np.ndarray | int) -> np.ndarray:
    """Vectorised `hop_targets`: letters (R, L), k an int or (R,) ints -> (R, L) targets."""
    rows, length = letters.shape
    prev = np.full((rows, length), -1, dtype=np.int64)  # (R, L): last earlier position of the same letter
    last = np.full((rows, len(ALPHABET)), -1, dtype=np.int64)  # (R, A)
    r = np.arange(rows)
    for i in range(length):
        prev[:, i] = last[r, letters[:, i]]
        last[r, letters[:, i]] = i
    ks = np.broadcast_to(np.asarray(k, dtype=np.int64), (rows,))[:, None]  # (R, 1)
    p = np.broadcast_to(np.arange(length), (rows, length)).copy()  # (R, L) hop pointers
    alive = np.ones((rows, length), dtype=bool)
    for j in range(int(ks.max(initial=0))):
        step = alive & (j < ks)  # rows whose k is not reached yet
        q = prev[r[:, None], np.where(alive, p, 0)]  # (R, L)
        alive &= ~(step & (q < 0))
        p = np.where(step & alive, q + 1, p)
    return np.where(alive, letters[r[:, None], p], _NONE_INDEX)


@dataclass(frozen=True, kw_only=True, slots=True)
class SymbolIds:
    """The token ids of the task's symbols under one tokenizer."""

    letters: np.ndarray  # (ALPHABET + 1,): each letter's id, then NONE's
    keys: np.ndarray  # (MAX_K + 1,): the id of the token naming k

    @classmethod
    def of(cls, tokenizer) -> SymbolIds:
        def one(symbol: str) -> int:
            ids = tokenizer.encode(symbol)
            if len(ids) != 1:
                raise UserError(f"tokenizer {tokenizer.spec!r} writes the hops symbol {symbol!r} as {len(ids)} "
                                "tokens; the probe needs one token per symbol (use the byte or char tokenizer)")
            return int(ids[0])

        return cls(letters=np.array([one(c) for c in ALPHABET + NONE], dtype=np.int64),
                   keys=np.array([one(c) for c in KEY_CHARS], dtype=np.int64))


def rows_of(letters: np.ndarray, k: np.ndarray, ids: SymbolIds) -> tuple[np.ndarray, np.ndarray]:
    """Token rows in the layout of the module docstring: letters (R, T-1), k (R,) -> inputs, targets (R, T)."""
    targets = hop_target_array(letters, k)  # (R, T-1)
    x = np.concatenate([ids.keys[k][:, None], ids.letters[letters]], axis=1)  # (R, T)
    y = np.concatenate([np.full((len(k), 1), IGNORE, dtype=np.int64), ids.letters[targets]], axis=1)  # (R, T)
    return x, y


def spec_key(canonical: str) -> int:
    """A 64-bit integer naming a probe spec in the generators' seeds."""
    return int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:8], "little")


def _generator(*words: int) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(np.random.SeedSequence(list(words))))


def train_rows(*, canonical: str, ks: tuple[int, ...], ids: SymbolIds, seed: int, step: int, rows: int,
               seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh training rows of `step`: (inputs, targets), each (rows, seq_len) int64."""
    if seq_len < 2:
        raise UserError(f"seq_len={seq_len}: a hops row needs at least 2 tokens (the k token and a letter)")
    rng = _generator(spec_key(canonical), 0, seed, step)
    k = np.asarray(ks, dtype=np.int64)[rng.integers(0, len(ks), size=rows)]  # (R,)
    return rows_of(random_letters(rng, rows, seq_len - 1), k, ids)


def held_out_rows(*, canonical: str, k: int, ids: SymbolIds, split: str, rows: int,
                  seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed `split` ("val" or "test") rows at hop count `k`, the same for every run and seed."""
    if split not in _SPLIT_KEYS:
        raise UserError(f"split={split!r} must be one of {', '.join(map(repr, _SPLIT_KEYS))}")
    if seq_len < 2:
        raise UserError(f"seq_len={seq_len}: a hops row needs at least 2 tokens (the k token and a letter)")
    rng = _generator(spec_key(canonical), _SPLIT_KEYS[split], k)
    return rows_of(random_letters(rng, rows, seq_len - 1), np.full(rows, k, dtype=np.int64), ids)


def examples_text(k: int, *, n: int, key: str, length: int = TEXT_LENGTH) -> list[tuple[str, str]]:
    """`n` sequences at hop count `k` written as text, (prompt, answer) each: the k token and `length`
    letters, then their targets. Rows come in blocks of `_TEXT_BLOCK`, block b drawn from (key, b) alone, so
    a longer list starts with a shorter one."""
    if n == 0:
        return []
    blocks = [random_letters(_generator(spec_key(key), 3, b), _TEXT_BLOCK, length)
              for b in range(-(-n // _TEXT_BLOCK))]
    letters = np.concatenate(blocks)[:n]  # (n, L)
    targets = hop_target_array(letters, k)  # (n, L)
    prompts = _LETTER_BYTES[letters].tobytes().decode("ascii")  # every row's letters, then cut per row
    answers = _LETTER_BYTES[targets].tobytes().decode("ascii")
    return [(KEY_CHARS[k] + prompts[i * length : (i + 1) * length], answers[i * length : (i + 1) * length])
            for i in range(n)]


__all__ = ["ALPHABET", "IGNORE", "KEY_CHARS", "MAX_K", "NONE", "SymbolIds", "examples_text", "held_out_rows",
           "hop_target_array", "hop_targets", "letters_text", "random_letters", "rows_of", "train_rows"]
