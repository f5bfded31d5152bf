"""Batches that do not depend on the model.

Training: the start positions of batch `step` are drawn by numpy's counter-based Philox generator
keyed by (seed, step) - `positions(step)` is a pure function of (tokens of the training split,
seq_len, batch_size, seed, step) - so every shape trained on the same data settings sees the same
windows in the same order, and a resumed run needs nothing but the step number. A window is
seq_len + 1 tokens: inputs are its first seq_len, targets its last seq_len.

Dense-target probes (`depthwidth.data.hops`): a training window whose start lies in such a probe's
training span is replaced by a fresh row of that probe, generated from (the probe's spec, seed, step),
with its own targets (a target at every position, `IGNORE` where there is none); its validation
windows are the probe's fixed held-out rows. Corpora without one are untouched by this.

Validation: `eval_windows` fixed windows per slice, evenly spaced over that slice's validation span
(np.linspace, rounded), never crossing into another slice.

`batch_stream_hash`: sha256 over a header (dataset hash, tokenizer, seq_len, batch size, seed; with a
dense probe, its generator's version too) and the int64 positions of every step of a run, so fairness
can be checked after the fact.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from depthwidth.errors import UserError
from depthwidth.data import hops
from depthwidth.data.dataset import Dataset
from depthwidth.data.probes import canonical, dense_spec

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
    #: a dense-target probe's fixed validation rows (inputs, targets), each (n_windows, seq_len), used
    #: instead of `positions`; None for every other slice
    rows: tuple[np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DenseProbe:
    """A dense-target probe slice of the training data (`depthwidth.data.hops`)."""

    name: str  # the slice's name, its probe spec
    span: tuple[int, int]  # its training tokens: a window starting in [start, end) becomes a fresh row
    key: str  # `probes.canonical` of its spec: what its rows are drawn from
    train_ks: tuple[int, ...]
    test_ks: tuple[int, ...]
    n_test: int  # held-out rows per test k
    ids: hops.SymbolIds

    def held_out(self, *, k: int, split: str, rows: int, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
        return hops.held_out_rows(canonical=self.key, k=k, ids=self.ids, split=split, rows=rows, seq_len=seq_len)


def dense_probes(dataset: Dataset) -> tuple[DenseProbe, ...]:
    out = []
    for s in dataset.slices:
        spec = dense_spec(s.name) if s.kind == "probe" else None
        if spec is not None:
            out.append(DenseProbe(name=s.name, span=s.train, key=canonical(spec), train_ks=spec.train_difficulties,
                                  test_ks=spec.test_difficulties, n_test=spec.n_test,
                                  ids=hops.SymbolIds.of(dataset.tokenizer)))
    return tuple(out)


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
        self.dense = dense_probes(dataset)

    def positions(self, step: int) -> np.ndarray:
        return batch_positions(n_tokens=len(self.tokens), seq_len=self.seq_len, batch_size=self.batch_size,
                               seed=self.seed, step=step)

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) of `step`, each (batch_size, seq_len) int64."""
        return self.rows(step, self.positions(step))

    def rows(self, step: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets) of `step` given its `positions`: the windows there, those that start in a
        dense-target probe's span replaced by fresh rows of that probe (module docstring)."""
        x, y = gather_windows(self.tokens, positions, self.seq_len)
        if not self.dense:
            return x, y
        x, y = x.copy(), y.copy()  # (B, T) each: the windows were overlapping views of one array
        for d in self.dense:
            hit = np.flatnonzero((positions >= d.span[0]) & (positions < d.span[1]))  # (R,) rows of this probe
            if len(hit):
                x[hit], y[hit] = hops.train_rows(canonical=d.key, ks=d.train_ks, ids=d.ids, seed=self.seed, step=step,
                                                 rows=len(hit), seq_len=self.seq_len)
        return x, y

    def header(self) -> bytes:
        d = self.dataset
        fields = [STREAM_FORMAT, d.dataset_hash, d.tokenizer.fingerprint, self.seq_len, self.batch_size, self.seed]
        if self.dense:  # the rows drawn for a dense probe depend on its generator too
            fields.append(hops.FORMAT)
        return json.dumps(fields).encode()

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
        dense = {d.name: d for d in self.dense}
        for s in self.dataset.slices:
            start, end = s.span(split)
            if s.name in dense:
                out.append(EvalSlice(name=s.name, kind=s.kind, positions=np.zeros(0, dtype=np.int64),
                                     tokens=end - start, rows=self._held_out(dense[s.name], count, split)))
                continue
            try:
                pos = eval_positions(start=start, end=end, seq_len=self.seq_len, count=count)
            except ValueError:
                raise UserError(
                    f"slice {s.name!r} has {end - start} {split} tokens, fewer than seq_len + 1 = "
                    f"{self.seq_len + 1}; raise val_fraction or lower seq_len"
                ) from None
            out.append(EvalSlice(name=s.name, kind=s.kind, positions=pos, tokens=end - start))
        return tuple(out)

    def _held_out(self, d: DenseProbe, count: int, split: str) -> tuple[np.ndarray, np.ndarray]:
        """`count` fixed rows of a dense probe, spread evenly over its train difficulties ("val") or its
        test difficulties ("test")."""
        ks = d.train_ks if split == "val" else d.test_ks
        parts = [d.held_out(k=k, split=split, rows=count // len(ks) + (i < count % len(ks)), seq_len=self.seq_len)
                 for i, k in enumerate(ks)]
        parts = [p for p in parts if len(p[0])]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


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
