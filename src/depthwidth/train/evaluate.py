"""Validation loss on fixed windows: overall, per slice and by position in the context.

A dense-target probe slice (`EvalSlice.rows`, `depthwidth.data.hops`) is scored on its fixed held-out
rows with their own targets, positions without a target (`IGNORE`) left out of every mean."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from depthwidth.data.batches import EvalSlice, gather_windows
from depthwidth.data.hops import IGNORE

N_POSITION_BUCKETS = 8


def position_buckets(seq_len: int, n: int = N_POSITION_BUCKETS) -> list[list[int]]:
    """`n` (at most seq_len) contiguous, near-equal [start, end) ranges of context positions."""
    n = min(n, seq_len)
    edges = [round(i * seq_len / n) for i in range(n + 1)]
    return [[edges[i], edges[i + 1]] for i in range(n)]


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalOutcome:
    loss: float  # slices weighted by their validation tokens
    by_slice: dict[str, float]
    by_position: list[float]  # one mean per bucket, slices weighted as in `loss`
    windows: int
    tokens: int


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    *,
    tokens: np.ndarray,  # (N_val,) the validation split
    slices: tuple[EvalSlice, ...],
    seq_len: int,
    batch_size: int,
    device: torch.device,
    autocast: contextlib.AbstractContextManager | None = None,
) -> EvalOutcome:
    """Mean next-token cross-entropy (nats) over every position of every fixed window.

    The overall loss weights each slice's mean by its share of validation tokens, so it estimates
    the loss on the whole validation split while every slice keeps the same number of windows."""
    was_training = model.training
    model.eval()
    buckets = position_buckets(seq_len)
    per_slice, per_slice_pos, weights = {}, {}, {}
    windows = 0
    try:
        for s in slices:
            if s.rows is not None:
                per_slice[s.name], per_slice_pos[s.name] = _dense_loss(model, s.rows, buckets=buckets,
                                                                       batch_size=batch_size, device=device,
                                                                       autocast=autocast)
                windows += len(s.rows[0])
                weights[s.name] = s.tokens
                continue
            pos_sum = torch.zeros(seq_len, dtype=torch.float64, device=device)  # (T,)
            for start in range(0, len(s.positions), batch_size):
                x, y = gather_windows(tokens, s.positions[start : start + batch_size], seq_len)  # (b, T)
                x = torch.from_numpy(x).to(device)
                y = torch.from_numpy(y).to(device)
                with autocast if autocast is not None else contextlib.nullcontext():
                    logits, _ = model(x)  # (b, T, V)
                losses = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none")  # (b*T,)
                pos_sum += losses.view(x.shape[0], seq_len).double().sum(0)
            n = len(s.positions)
            windows += n
            pos_mean = (pos_sum / n).cpu()  # (T,)
            per_slice[s.name] = float(pos_mean.mean())
            per_slice_pos[s.name] = [float(pos_mean[a:b].mean()) for a, b in buckets]
            weights[s.name] = s.tokens
    finally:
        model.train(was_training)
    total = sum(weights.values())
    loss = sum(per_slice[k] * weights[k] for k in per_slice) / total
    by_position = [sum(per_slice_pos[k][i] * weights[k] for k in per_slice) / total for i in range(len(buckets))]
    return EvalOutcome(loss=loss, by_slice=per_slice, by_position=by_position, windows=windows,
                       tokens=windows * seq_len)


def _dense_loss(model, rows: tuple[np.ndarray, np.ndarray], *, buckets, batch_size: int, device,
                autocast) -> tuple[float, list[float]]:
    """Mean cross-entropy over the scored positions of fixed (inputs, targets) rows, overall and per bucket."""
    inputs, targets = rows  # (N, T) each
    seq_len = inputs.shape[1]
    pos_sum = torch.zeros(seq_len, dtype=torch.float64, device=device)  # (T,)
    pos_count = torch.zeros(seq_len, dtype=torch.float64, device=device)  # (T,)
    for start in range(0, len(inputs), batch_size):
        x = torch.from_numpy(inputs[start : start + batch_size]).to(device)  # (b, T)
        y = torch.from_numpy(targets[start : start + batch_size]).to(device)  # (b, T)
        with autocast if autocast is not None else contextlib.nullcontext():
            logits, _ = model(x)  # (b, T, V)
        losses = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none",
                                 ignore_index=IGNORE)  # (b*T,), 0 where ignored
        pos_sum += losses.view(x.shape[0], seq_len).double().sum(0)
        pos_count += (y != IGNORE).double().sum(0)
    total = float(pos_sum.sum() / pos_count.sum().clamp(min=1))
    by_bucket = [float(pos_sum[a:b].sum() / pos_count[a:b].sum()) if pos_count[a:b].sum() > 0 else total
                 for a, b in buckets]
    return total, by_bucket
