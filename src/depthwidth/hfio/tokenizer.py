"""Our tokenizers as a Hugging Face `tokenizer.json` (the `tokenizers` library's format), so that
`transformers.AutoTokenizer` reads the exported folder and gives our token ids.

- `byte`: a byte-level BPE without merges whose vocabulary maps the printable stand-in of byte b
  (the GPT-2 byte-to-character table, Radford et al. 2019) to id b: the ids are the UTF-8 bytes.
- `char`: a BPE without merges over the training characters, id 1 onward in code-point order, and
  id 0 for anything else (our `UNK_ID`), spelled U+FFFD (what ours decodes it to) unless U+FFFD is a
  training character, then "<unk>"; no pre-tokenizer, so every character is one token.
- `bpe:N`: our trained byte-level BPE is already a `tokenizers` JSON and is written as it is. Ours
  encodes long texts in chunks cut after a newline about every 4096 characters; a pre-token never
  crosses such a cut except where the next chunk starts with white space, so the two agree on any
  text without such a cut (checked in the tests; see the closing note of the export for the rest).
No special tokens: the models were trained without BOS/EOS/padding.
"""

from __future__ import annotations

import json

from depthwidth.data.tokenizers import UNK_ID, BPETokenizer, ByteTokenizer, CharTokenizer, Tokenizer

TOKENIZER = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"


def byte_to_char() -> dict[int, str]:
    """Byte value -> the printable character that stands for it in byte-level BPE vocabularies:
    printable Latin-1 bytes stand for themselves, the other 68 bytes map to U+0100 onward in order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    out, shifted = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + shifted)
            shifted += 1
    return out


def _byte_json() -> str:
    from tokenizers import Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

    vocab = {char: b for b, char in byte_to_char().items()}
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok.to_str()


def _char_json(chars: str) -> str:
    from tokenizers import Tokenizer as HFTokenizer, decoders, models

    unk = "<unk>" if "\ufffd" in chars else "\ufffd"
    vocab = {unk: UNK_ID, **{c: i for i, c in enumerate(chars, start=1)}}
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=[], unk_token=unk, fuse_unk=False))
    tok.decoder = decoders.Fuse()
    return tok.to_str()


def tokenizer_json(tokenizer: Tokenizer) -> str:
    """The `tokenizer.json` text of one of our tokenizers."""
    if isinstance(tokenizer, ByteTokenizer):
        return _byte_json()
    if isinstance(tokenizer, CharTokenizer):
        return _char_json(tokenizer.chars)
    if isinstance(tokenizer, BPETokenizer):
        return tokenizer.state()["json"]
    raise TypeError(f"no tokenizer.json for {type(tokenizer).__name__}")


def tokenizer_files(tokenizer: Tokenizer, *, max_len: int) -> dict[str, str]:
    """File name -> text: `tokenizer.json` and the `tokenizer_config.json` that makes `AutoTokenizer`
    read it as a fast tokenizer, with our spec and fingerprint recorded for imports to check."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_len,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
        "depthwidth_tokenizer": tokenizer.spec,
        "depthwidth_fingerprint": tokenizer.fingerprint,
    }
    return {TOKENIZER: tokenizer_json(tokenizer), TOKENIZER_CONFIG: json.dumps(config, indent=2) + "\n"}


__all__ = ["TOKENIZER", "TOKENIZER_CONFIG", "byte_to_char", "tokenizer_files", "tokenizer_json"]
