"""`inspect_run` / `inspect_hf`: a model's `LayerReport` (`depthwidth.diagnose.layers`) on its own data.

- a run folder (or checkpoint): the run's own validation windows, `windows` per slice, rebuilt from the
  recorded config (`depthwidth.bench.quant_report.EvalData`: same corpus, tokenizer, split, seq_len;
  its dataset hash must match), a dense probe's held-out rows included, each position weighted as the
  trainer's `evaluate` weights it (each slice's mean by its share of validation tokens, a dense probe's
  unscored positions left out), so the full model's loss is the run's validation loss on those windows;
  or a text file tokenized with the run's tokenizer (`depthwidth.hf.export.run_tokenizer`);
- a Hugging Face folder: a text file tokenized with the folder's tokenizer (`transformers.AutoTokenizer`,
  local files only), or, for an export of ours with the byte tokenizer, a corpus name whose validation
  split gives the windows.

A text is cut into consecutive windows of seq_len + 1 tokens (the run's seq_len; an HF folder's max
context, at most DEFAULT_HF_SEQ_LEN), at most `windows` of them; a text shorter than one window gives one
shorter window. What the report holds at once is checked against free memory (`machine.check_fits`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from depthwidth.diagnose.layers import LayerReport, layer_report, report_bytes
from depthwidth.diagnose.limits import DEFAULT_TOLERANCE, DEFAULT_WINDOWS, MAX_WINDOWS
from depthwidth.errors import UserError

#: the window length of an HF folder's text when its context is longer
DEFAULT_HF_SEQ_LEN = 256
#: batch of windows per forward
BATCH = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class Inspection:
    """A model's layer report and what it was measured on."""

    source: str
    shape_label: str
    data: str  # "validation of CORPUS", "text FILE" or "corpus CORPUS"
    report: LayerReport

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "shape": self.shape_label, "data": self.data, **self.report.to_dict()}


def check_windows_arg(windows: int) -> int:
    if isinstance(windows, bool) or not isinstance(windows, int) or not 1 <= windows <= MAX_WINDOWS:
        raise UserError(f"--windows {windows!r} is out of range; give a whole number of windows from 1 to "
                        f"{MAX_WINDOWS}")
    return windows


def text_windows(ids: np.ndarray, *, seq_len: int, windows: int, source: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Consecutive windows (N, T) of token ids `ids`, inputs and next-token targets."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) < 2:
        raise UserError(f"{source} gives {len(ids)} token(s); a window needs at least 2 (give a longer text)")
    T = min(seq_len, len(ids) - 1)
    n = min(windows, (len(ids) - 1) // T)
    idx = np.arange(n)[:, None] * T + np.arange(T + 1)  # (N, T+1)
    w = torch.from_numpy(ids[idx])
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()


def read_text_file(path: str | os.PathLike) -> str:
    from depthwidth.files import read_text

    text = read_text(path, what="text", max_bytes=64 << 20)
    if not text.strip():
        raise UserError(f"{path}: the text is empty; give a file with text to evaluate on")
    return text


def _measure(model, *, inputs, targets, tolerance: float, source: str, weights=None) -> LayerReport:
    from depthwidth.machine import check_fits

    check_fits(report_bytes(model, batch_size=min(BATCH, inputs.shape[0]), seq_len=inputs.shape[1]),
               what=f"inspecting {source} ({inputs.shape[1]} tokens a window, batch {BATCH})")
    return layer_report(model, inputs=inputs, targets=targets, tolerance=tolerance, batch_size=BATCH,
                        weights=weights)


def validation_windows(config, *, dataset_hash,
                       windows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The run's validation windows, `windows` per slice: inputs, targets and position weights, each (N, T).

    The weights are those of `depthwidth.train.evaluate.evaluate`: slice k (validation tokens t_k, of t in
    all) weighs t_k / t, spread evenly over its scored positions (every position of its windows; a dense
    probe's positions whose target is not `IGNORE`)."""
    from dataclasses import replace

    from depthwidth.bench.quant_report import EvalData
    from depthwidth.data.batches import gather_windows
    from depthwidth.data.hops import IGNORE

    data = EvalData(replace(config, eval_windows=windows), dataset_hash=dataset_hash)
    total = sum(s.tokens for s in data.slices)
    xs, ys, ws = [], [], []
    for s in data.slices:
        if s.rows is not None:
            x, y = s.rows  # (n, T) each, a dense probe's held-out rows and their targets
        else:
            x, y = gather_windows(data.tokens, s.positions, data.seq_len)  # (n, T)
        scored = y != IGNORE
        if not scored.any():
            continue
        xs.append(x)
        ys.append(y)
        ws.append(scored * (s.tokens / total / scored.sum()))
    x, y, w = (np.concatenate(parts) for parts in (xs, ys, ws))
    return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64)), torch.from_numpy(w)


def inspect_run(path: str | os.PathLike, *, windows: int = DEFAULT_WINDOWS, text: str | os.PathLike | None = None,
                tolerance: float = DEFAULT_TOLERANCE) -> Inspection:
    """The layer report of a trained run (see the module docstring)."""
    from depthwidth.artifact.load import load_trained

    check_windows_arg(windows)
    run = load_trained(Path(path))
    if run.config is None:
        raise UserError(f"{run.checkpoint} records no train config, so neither its validation windows nor its "
                        "tokenizer can be rebuilt; inspect a run folder written by depthwidth train")
    if text is not None:
        from depthwidth.hf.export import run_tokenizer

        body = read_text_file(text)
        tokenizer = run_tokenizer(run.config, dataset_hash=run.meta.dataset_hash)
        x, y = text_windows(tokenizer.encode(body), seq_len=run.config.seq_len, windows=windows, source=str(text))
        data = f"text {text}"
        w = None
    else:
        x, y, w = validation_windows(run.config, dataset_hash=run.meta.dataset_hash, windows=windows)
        data = f"validation of {run.config.corpus}"
    report = _measure(run.model, inputs=x, targets=y, tolerance=tolerance, source=str(path), weights=w)
    return Inspection(source=str(path), shape_label=run.shape.label(), data=data, report=report)


def _export_record(folder: Path) -> dict:
    from depthwidth.files import read_json_object

    record = read_json_object(folder / "config.json", what="config").get("depthwidth")
    return record if isinstance(record, dict) else {}


def inspect_hf(folder: str | os.PathLike, *, text: str | os.PathLike | None = None, corpus: str | None = None,
               windows: int = DEFAULT_WINDOWS, tolerance: float = DEFAULT_TOLERANCE) -> Inspection:
    """The layer report of a local Hugging Face folder on a text file or (an export of ours with the byte
    tokenizer) a corpus's validation split."""
    from depthwidth.hfio.load import load_hf_model

    check_windows_arg(windows)
    if (text is None) == (corpus is None):
        raise UserError("give the data to inspect an HF folder on: --text FILE or --data CORPUS, one of them")
    model, info = load_hf_model(folder, exact=True)
    record = _export_record(Path(info.folder))
    run_config = (record.get("run") or {}).get("config") or {}
    seq_len = run_config.get("seq_len") if isinstance(run_config.get("seq_len"), int) else DEFAULT_HF_SEQ_LEN
    seq_len = min(seq_len, model.shape.max_seq_len)
    if corpus is not None:
        if record.get("tokenizer") != "byte":
            raise UserError(f"--data needs an HF folder exported by depthwidth with the byte tokenizer; {folder} "
                            f"has {record.get('tokenizer') or 'another tokenizer'}: give --text FILE")
        from depthwidth.data.dataset import load_dataset

        dataset = load_dataset(corpus=corpus, tokenizer="byte")
        x, y = text_windows(np.asarray(dataset.split("val")), seq_len=seq_len, windows=windows,
                            source=f"the validation split of {corpus}")
        data = f"corpus {corpus}"
    else:
        body = read_text_file(text)
        x, y = text_windows(_auto_tokenize(Path(info.folder), body), seq_len=seq_len, windows=windows,
                            source=str(text))
        data = f"text {text}"
    if int(x.max()) >= model.shape.vocab_size:
        raise UserError(f"the tokenizer of {folder} gives ids up to {int(x.max())}, beyond the model's vocabulary "
                        f"of {model.shape.vocab_size}")
    report = _measure(model, inputs=x, targets=y, tolerance=tolerance, source=str(folder))
    return Inspection(source=str(folder), shape_label=model.shape.label(), data=data, report=report)


def _auto_tokenize(folder: Path, text: str) -> np.ndarray:
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError("reading an HF folder's tokenizer needs transformers: pip install transformers") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder}: its tokenizer cannot be read ({str(exc).splitlines()[0]})") from None
    return np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)


__all__ = ["DEFAULT_WINDOWS", "MAX_WINDOWS", "Inspection", "check_windows_arg", "inspect_hf", "inspect_run",
           "text_windows", "validation_windows"]
