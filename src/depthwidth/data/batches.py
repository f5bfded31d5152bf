"""Batches that do not depend on the model.

Training: the start positions of batch `step` are drawn by numpy's counter-based Philox generator
keyed by (seed, step) - `positions(step)` is a pure function of (tokens of the training split,
seq_len, batch_size, seed, step) - so every shape trained on the same data settings sees the same
windows in the same order, and a resumed run needs nothing but the step number. A window is
seq_len + 1 tokens: inputs are its first seq_len, targets its last seq_len.

Validation: `eval_windows` fixed windows per slice, evenly spaced over that slice's validation span
(np.linspace, rounded), never crossing into another slice.

`batch_stream_hash`: sha256 over a header (dataset hash, tokenizer, seq_len, batch size, seed) and
the int64 positions of every step of a run, so fairness can be checked after the fact.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from depthwidth.errors import UserError
from depthwidth.data.dataset import Dataset

STREAM_FORMAT = "depthwidth-batches-v1"
_MAX_SEED = (1 << 64) - 1


def batch_positions(*, n_tokens: int, seq_len: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Start positions (int64, shape (batch_size,)) of training windows for `step`, uniform in
    [0, n_tokens - seq_len - 1]."""
    if n_tokens < seq_len + 1:
        raise UserError(f"n_tokens={n_tokens} is fewer than seq_len + 1 = {seq_len + 1}")
    if not 0 <= seed <= _MAX_SEED or step < 0:
        raise UserError(f"seed={seed} must be in [0, 2**64) and step={step} >= 0")
    rng = np.random.Generator(np.random.Philox(key=(seed << 64) | step))
    return rng.integers(0, n_tokens - seq_len, size=batch_size, dtype=np.int64)


def gather_windows(tokens: np.ndarray, positions: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets, int64 arrays of shape (B, seq_len)."""
    idx = positions[:, None] + np.arange(seq_len + 1, dtype=np.int64)  # (B, T+1)
    windows = np.asarray(tokens[idx], dtype=np.int64)  # (B, T+1)
    return windows[:, :-1], windows[:, 1:]


def eval_positions(*, start: int, end: int, seq_len: int, count: int) -> np.ndarray:
    """`count` evenly spaced window starts inside [start, end) (fewer when the span is short)."""
    last = end - seq_len - 1  # last start whose window fits
    if last < start:
        raise UserError(f"a span of {end - start} tokens cannot hold one window of seq_len + 1 = {seq_len + 1}")
    count = min(count, last - start + 1)
    return np.unique(np.linspace(start, last, count).round().astype(np.int64))


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalSlice:
    name: str
    kind: str
    positions: np.ndarray  # (n_windows,) starts in the split's token array
    tokens: int  # validation tokens of this slice (its weight in the overall loss)


class BatchStream:
    """The training batches and validation windows of one (dataset, seq_len, batch_size, seed)."""

    def __init__(self, dataset: Dataset, *, seq_len: int, batch_size: int, seed: int) -> None:
        self.dataset = dataset
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.seed = seed
        self.tokens = dataset.train
        n = len(self.tokens)
        if n < batch_size * seq_len + 1:
            raise UserError(
                f"corpus {dataset.corpus_spec!r}: the training split has {n} tokens, fewer than one batch "
                f"(batch_size * seq_len + 1 = {batch_size * seq_len + 1}); use a larger corpus or a smaller "
                "batch_size / seq_len"
            )

    def positions(self, step: int) -> np.ndarray:
        return batch_positions(n_tokens=len(self.tokens), seq_len=self.seq_len, batch_size=self.batch_size,
                               seed=self.seed, step=step)

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) of `step`, each (batch_size, seq_len) int64."""
        return gather_windows(self.tokens, self.positions(step), self.seq_len)

    def header(self) -> bytes:
        d = self.dataset
        return json.dumps([STREAM_FORMAT, d.dataset_hash, d.tokenizer.fingerprint, self.seq_len,
                           self.batch_size, self.seed]).encode()

    def hasher(self) -> StreamHasher:
        return StreamHasher(self.header())

    def stream_hash(self, steps: int) -> str:
        """`batch_stream_hash` of a run of `steps` steps, computed without training."""
        h = self.hasher()
        for step in range(steps):
            h.update(self.positions(step))
        return h.hexdigest()

    def eval_slices(self, count: int, *, split: str = "val") -> tuple[EvalSlice, ...]:
        """`count` fixed windows per slice of `split`."""
        out = []
        for s in self.dataset.slices:
            start, end = s.span(split)
            try:
                pos = eval_positions(start=start, end=end, seq_len=self.seq_len, count=count)
            except ValueError:
                raise UserError(
                    f"slice {s.name!r} has {end - start} {split} tokens, fewer than seq_len + 1 = "
                    f"{self.seq_len + 1}; raise val_fraction or lower seq_len"
                ) from None
            out.append(EvalSlice(name=s.name, kind=s.kind, positions=pos, tokens=end - start))
        return tuple(out)


class StreamHasher:
    """Running sha256 over the header and each step's positions, in step order."""

    def __init__(self, header: bytes) -> None:
        self._h = hashlib.sha256(header)
        self.steps = 0

    def update(self, positions: np.ndarray) -> None:
        self._h.update(np.ascontiguousarray(positions, dtype="<i8").tobytes())
        self.steps += 1

    def hexdigest(self) -> str:
        return self._h.hexdigest()
