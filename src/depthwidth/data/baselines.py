"""The data's own baselines: unigram and bigram cross-entropy of the validation split under the
training split's counts, overall and per slice, in nats per token.

A language model's loss means something only against what counting does on the same tokens. A model
that has learned only which tokens are frequent sits at the **unigram** level; one that has learned
only which token follows which sits at the **bigram** level (a 0-layer Transformer, embedding straight
into the unembedding, can represent exactly a bigram table). A loss above the bigram level says the
model has not yet used more than one token of context, whatever its shape: ranking shapes there ranks
how fast they learn letter frequencies, not language modelling.

Counts. Unigram and bigram counts come from the training split, pairs taken inside each slice's
training span only (no pair across two slices). Smoothing (`SMOOTHING`): add-one (Laplace) over the
whole vocabulary V, so every token of the validation split has a finite cost:

    p(b)     = (c(b) + 1) / (N + V)
    p(b | a) = (c(a, b) + 1) / (c(a) + V)        c(a) = pairs whose first token is a

Targets. The scored targets are every validation token but the first of each slice's validation span
(that one has no preceding token), as a model's evaluation scores every position after the first
token of a window. A slice's value is the mean over its targets; the overall value weights slices by
their validation tokens, as `train/evaluate.py` weights the model's overall loss. Dense-target probe
slices (hop-k rows) are not counted text and are left out.

Cache: `baselines.json` in the token cache folder of the dataset (`data/dataset.py`), keyed by the
dataset hash; a file that does not match is recomputed. Computing them costs one pass of `np.bincount`
over the training split (about 0.4 s for 5 MB of bytes). numpy is imported only to compute them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from depthwidth.serial import Serializable

SMOOTHING = "add-one (Laplace) over the vocabulary; counts from the training split"
BASELINES_FILE = "baselines.json"
#: bumped when the rule above changes (a cached file of another version is recomputed)
BASELINES_VERSION = 1
#: vocabularies above this use a sparse (hashed pair) count instead of a V x V table
DENSE_VOCAB = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class SliceBaseline(Serializable):
    """One slice's validation targets scored by the unigram and bigram tables (nats per token)."""

    name: str
    targets: int  # validation tokens scored (the slice's validation tokens less its first)
    unigram: float
    bigram: float


@dataclass(frozen=True, kw_only=True, slots=True)
class NgramBaselines(Serializable):
    """The unigram and bigram cross-entropy of a dataset's validation split (module docstring)."""

    dataset_hash: str
    vocab_size: int
    smoothing: str
    unigram: float  # overall, slices weighted by their validation tokens
    bigram: float
    targets: int
    slices: tuple[SliceBaseline, ...] = ()
    version: int = BASELINES_VERSION

    def of_slice(self, name: str) -> SliceBaseline | None:
        return next((s for s in self.slices if s.name == name), None)

    def describe(self) -> str:
        """'unigram 3.33, bigram 2.54 nats per token (validation split, add-one smoothing)'."""
        return (f"unigram {self.unigram:.3f}, bigram {self.bigram:.3f} nats per token (validation split, "
                "add-one smoothing, counts from the training split)")


def _dense(name: str) -> bool:
    """A probe slice whose evaluation scores its own dense-target rows, not the token stream."""
    from depthwidth.data.probes import DENSE_PROBES

    return any(name == p or name.startswith(f"probe:{p}") for p in DENSE_PROBES)


def _spans(dataset, split: str) -> list[tuple[str, int, int]]:
    """(slice name, start, end) of each counted slice (dense probe rows left out)."""
    return [(s.name, *s.span(split)) for s in dataset.slices if not (s.kind == "probe" and _dense(s.name))]


def _pair_counts(train, spans: list[tuple[int, int]], vocab: int):
    """(first-token counts c(a) over pairs, a function (a, b) arrays -> c(a, b)) from the pairs inside each span."""
    import numpy as np

    firsts, seconds = [], []
    for start, end in spans:
        if end - start >= 2:
            part = np.asarray(train[start:end], dtype=np.int64)
            firsts.append(part[:-1])
            seconds.append(part[1:])
    a = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
    b = np.concatenate(seconds) if seconds else np.zeros(0, dtype=np.int64)
    first_counts = np.bincount(a, minlength=vocab)
    if vocab <= DENSE_VOCAB:
        table = np.bincount(a * vocab + b, minlength=vocab * vocab).reshape(vocab, vocab)
        return first_counts, lambda x, y: table[x, y]
    keys, counts = np.unique(a * vocab + b, return_counts=True)

    def lookup(x, y):
        k = x * vocab + y
        at = np.searchsorted(keys, k)
        found = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == k)
        return np.where(found, counts[np.minimum(at, len(keys) - 1)], 0)
    return first_counts, lookup


def compute_baselines(dataset) -> NgramBaselines:
    """The baselines of `dataset` (a `data.dataset.Dataset`), computed now (no cache)."""
    import numpy as np

    vocab = int(dataset.vocab_size)
    train_spans = _spans(dataset, "train")
    train = dataset.train
    unigram = np.zeros(vocab, dtype=np.int64)
    for _, start, end in train_spans:
        if end > start:
            unigram += np.bincount(np.asarray(train[start:end], dtype=np.int64), minlength=vocab)[:vocab]
    log_unigram = np.log(unigram + 1.0) - math.log(float(unigram.sum()) + vocab)
    first_counts, pair = _pair_counts(train, [(s, e) for _, s, e in train_spans], vocab)
    out = []
    for name, start, end in _spans(dataset, "val"):
        val = np.asarray(dataset.val[start:end], dtype=np.int64)
        if len(val) < 2:
            continue
        prev, nxt = val[:-1], val[1:]
        uni = -float(log_unigram[nxt].mean())
        bi = -float(np.mean(np.log(pair(prev, nxt) + 1.0) - np.log(first_counts[prev] + float(vocab))))
        out.append(SliceBaseline(name=name, targets=int(len(nxt)), unigram=uni, bigram=bi))
    total = sum(s.targets for s in out)
    weight = {s.name: s.targets / total for s in out} if total else {}
    return NgramBaselines(
        dataset_hash=dataset.dataset_hash, vocab_size=vocab, smoothing=SMOOTHING,
        unigram=sum(weight[s.name] * s.unigram for s in out) if total else math.nan,
        bigram=sum(weight[s.name] * s.bigram for s in out) if total else math.nan,
        targets=total, slices=tuple(out))


def ngram_baselines(dataset) -> NgramBaselines | None:
    """The baselines of `dataset`, from `baselines.json` in its token cache folder when that file matches
    its dataset hash, else computed and written there. None when the validation split is empty."""
    from depthwidth.errors import UserError
    from depthwidth.files import write_json

    path = Path(dataset.cache_path) / BASELINES_FILE
    if path.is_file():
        try:
            cached = NgramBaselines.from_dict(json.loads(path.read_text(encoding="utf-8")))
            if cached.dataset_hash == dataset.dataset_hash and cached.version == BASELINES_VERSION:
                return cached
        except (ValueError, TypeError, KeyError, UserError):
            pass  # a damaged or older cache file: recompute it
    found = compute_baselines(dataset)
    if not found.targets:
        return None
    try:
        write_json(path, found.to_dict())
    except OSError:
        pass  # a read-only cache still gets the numbers, just not kept
    return found


__all__ = ["BASELINES_FILE", "NgramBaselines", "SMOOTHING", "SliceBaseline", "compute_baselines", "ngram_baselines"]
