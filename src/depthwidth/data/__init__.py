"""Corpora, tokenizers, cached token arrays and model-independent batches.

Names are imported on first use (`depthwidth.lazy`), so importing one submodule, such as the
configuration, does not import the whole package (torch included)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "BPETokenizer": "depthwidth.data.tokenizers",
    "BatchStream": "depthwidth.data.batches",
    "ByteTokenizer": "depthwidth.data.tokenizers",
    "CharTokenizer": "depthwidth.data.tokenizers",
    "Corpus": "depthwidth.data.corpora",
    "CorpusSlice": "depthwidth.data.corpora",
    "Dataset": "depthwidth.data.dataset",
    "Document": "depthwidth.data.corpora",
    "EvalSlice": "depthwidth.data.batches",
    "NAMED_CORPORA": "depthwidth.data.corpora",
    "SPLIT_RULE": "depthwidth.data.dataset",
    "SliceInfo": "depthwidth.data.dataset",
    "StreamHasher": "depthwidth.data.batches",
    "TOKENIZER_KINDS": "depthwidth.data.specs",
    "UNK_ID": "depthwidth.data.tokenizers",
    "batch_positions": "depthwidth.data.batches",
    "eval_positions": "depthwidth.data.batches",
    "gather_windows": "depthwidth.data.batches",
    "load_corpus": "depthwidth.data.corpora",
    "load_dataset": "depthwidth.data.dataset",
    "parse_tokenizer_spec": "depthwidth.data.specs",
    "split_text": "depthwidth.data.dataset",
    "train_tokenizer": "depthwidth.data.tokenizers",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
