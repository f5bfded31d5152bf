"""Exact-match accuracy of a trained model on probe test examples (teacher-forced).

Each example is fed as `"\\n" + prompt + answer` (the newline is the boundary every training example
follows); it counts as correct when the model's argmax at every answer position is the answer's
token. Prompt and answer are tokenized separately and concatenated, so the answer's tokens are known
exactly (identical to joint tokenization for the byte and char tokenizers).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict

import numpy as np
import torch

from depthwidth.errors import UserError
from depthwidth.data.probes import ProbeExample


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
