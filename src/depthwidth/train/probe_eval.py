"""Accuracy of a trained model on the held-out examples of every probe slice, by difficulty (teacher-forced).

Exact match (`probe_accuracy`), for the probes with one answer per example: 
each example is fed as `"\\n" + prompt + answer` (the newline is the boundary every training example
follows); it counts as correct when the model's argmax at every answer position is the answer's
token. Prompt and answer are tokenized separately and concatenated, so the answer's tokens are known
exactly (identical to joint tokenization for the byte and char tokenizers).

Token accuracy (`dense_accuracy`), for the dense-target probes (`depthwidth.data.hops`): the share of
scored positions of the fixed test rows at each k whose argmax is the target; token error is one minus
it. `probe_scores` gives both kinds in one dict, {probe: {difficulty: accuracy}}, as a run records them.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict

import numpy as np
import torch

from depthwidth.errors import UserError
from depthwidth.data.batches import DenseProbe
from depthwidth.data.hops import IGNORE
from depthwidth.data.probes import ProbeExample, dense_spec, parse_probe_spec, probe_test_set


@torch.no_grad()
def probe_accuracy(
    model: torch.nn.Module,
    *,
    tokenizer,
    examples: list[ProbeExample],
    device: torch.device | str = "cpu",
    batch_size: int = 64,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[str, dict[int, float]]:
    """{probe: {difficulty: accuracy}} over `examples`."""
    encoded = []
    for ex in examples:
        prompt = np.asarray(tokenizer.encode("\n" + ex.prompt), dtype=np.int64)
        answer = np.asarray(tokenizer.encode(ex.answer), dtype=np.int64)
        encoded.append((ex, np.concatenate([prompt, answer]), len(prompt), len(answer)))
    max_len = model.shape.max_seq_len
    too_long = [e for e in encoded if len(e[1]) > max_len]
    if too_long:
        raise UserError(f"probe example of {len(too_long[0][1])} tokens exceeds max_seq_len={max_len}; "
                         "use a longer context or easier difficulties")
    correct: dict[tuple[str, int], int] = defaultdict(int)
    total: dict[tuple[str, int], int] = defaultdict(int)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start : start + batch_size]
            width = max(len(e[1]) for e in chunk)
            x = torch.zeros(len(chunk), width, dtype=torch.long)  # (b, T), right-padded
            for i, (_, ids, _, _) in enumerate(chunk):
                x[i, : len(ids)] = torch.from_numpy(ids)
            with autocast if autocast is not None else contextlib.nullcontext():
                logits, _ = model(x.to(device))  # (b, T, V)
            pred = logits.argmax(dim=-1).cpu()  # (b, T): prediction of the next token
            for i, (ex, ids, n_prompt, n_answer) in enumerate(chunk):
                # the token at position p is predicted at position p - 1
                got = pred[i, n_prompt - 1 : n_prompt - 1 + n_answer]
                ok = bool(torch.equal(got, torch.from_numpy(ids[n_prompt:])))
                key = (ex.probe, ex.difficulty)
                correct[key] += ok
                total[key] += 1
    finally:
        model.train(was_training)
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for (probe, difficulty), n in sorted(total.items()):
        out[probe][difficulty] = correct[(probe, difficulty)] / n
    return dict(out)


@torch.no_grad()
def dense_accuracy(
    model: torch.nn.Module,
    probe: DenseProbe,
    *,
    seq_len: int,
    device: torch.device | str = "cpu",
    batch_size: int = 64,
    autocast: contextlib.AbstractContextManager | None = None,
) -> dict[int, float]:
    """{k: token accuracy} on the probe's fixed test rows (`probe.n_test` rows of `seq_len` tokens per k)."""
    was_training = model.training
    model.eval()
    out = {}
    try:
        for k in probe.test_ks:
            inputs, targets = probe.held_out(k=k, split="test", rows=probe.n_test, seq_len=seq_len)  # (N, T) each
            right = scored = 0
            for start in range(0, len(inputs), batch_size):
                x = torch.from_numpy(inputs[start : start + batch_size]).to(device)  # (b, T)
                y = torch.from_numpy(targets[start : start + batch_size])  # (b, T)
                with autocast if autocast is not None else contextlib.nullcontext():
                    logits, _ = model(x)  # (b, T, V)
                pred = logits.argmax(dim=-1).cpu()  # (b, T): the answer about each position's own letter
                mask = y != IGNORE
                right += int((pred.eq(y) & mask).sum())
                scored += int(mask.sum())
            out[k] = right / scored
    finally:
        model.train(was_training)
    return out


def probe_scores(model: torch.nn.Module, *, slices, dense: tuple[DenseProbe, ...], tokenizer, seq_len: int,
                 device: torch.device | str = "cpu", batch_size: int = 64,
                 autocast: contextlib.AbstractContextManager | None = None) -> dict[str, dict[str, float]]:
    """{probe: {difficulty: accuracy}} for every probe slice among `slices` (the dataset's `SliceInfo`s):
    exact match, or token accuracy for the dense probes (module docstring)."""
    names = [s.name for s in slices if s.kind == "probe"]
    exact = [ex for name in names if dense_spec(name) is None for ex in probe_test_set(parse_probe_spec(name))]
    out: dict[str, dict[str, float]] = {}
    if exact:
        acc = probe_accuracy(model, tokenizer=tokenizer, examples=exact, device=device, batch_size=batch_size,
                             autocast=autocast)
        out.update({probe: {str(d): a for d, a in by.items()} for probe, by in acc.items()})
    for d in dense:
        acc = dense_accuracy(model, d, seq_len=seq_len, device=device, batch_size=batch_size, autocast=autocast)
        out[parse_probe_spec(d.name).name] = {str(k): a for k, a in acc.items()}
    return out
