"""Corpora, tokenizers, cached token arrays and model-independent batches."""

from depthwidth.data.batches import (
    BatchStream,
    EvalSlice,
    StreamHasher,
    batch_positions,
    eval_positions,
    gather_windows,
)
from depthwidth.data.corpora import NAMED_CORPORA, Corpus, CorpusSlice, Document, load_corpus
from depthwidth.data.dataset import (
    SPLIT_RULE,
    Dataset,
    SliceInfo,
    default_cache_dir,
    load_dataset,
    split_text,
)
from depthwidth.data.tokenizers import (
    TOKENIZER_KINDS,
    UNK_ID,
    BPETokenizer,
    ByteTokenizer,
    CharTokenizer,
    parse_tokenizer_spec,
    train_tokenizer,
)

__all__ = [
    "BPETokenizer",
    "BatchStream",
    "ByteTokenizer",
    "CharTokenizer",
    "Corpus",
    "CorpusSlice",
    "Dataset",
    "Document",
    "EvalSlice",
    "NAMED_CORPORA",
    "SPLIT_RULE",
    "SliceInfo",
    "StreamHasher",
    "TOKENIZER_KINDS",
    "UNK_ID",
    "batch_positions",
    "default_cache_dir",
    "eval_positions",
    "gather_windows",
    "load_corpus",
    "load_dataset",
    "parse_tokenizer_spec",
    "split_text",
    "train_tokenizer",
]
