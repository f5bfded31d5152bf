"""Does a model use its depth? Per-block measurements of a `Transformer` on fixed token windows.

For a model of L blocks with residual stream x_0 (the embedding) .. x_L (the last block's output, the
input of the final norm), x_l the input of block l:

- drop-a-layer: loss with block l skipped (x_{l+1} = x_l) minus the model's loss, and the same for each
  adjacent pair (l, l+1). Lad et al. 2024 (arXiv 2406.19384) find the first and last layers fragile and
  the middle robust.
- block influence BI_l = 1 - E_tokens[cos(x_l, x_{l+1})] (Men et al. 2024, ShortGPT, arXiv 2403.03853)
  and the angular distance arccos(cos(x_l, x_{l+n})) / pi, token mean, for n = 1, 2, 4 (Gromov et al.
  2024, arXiv 2403.17887); None where l + n > L.
- logit lens: the final norm, logit multiplier and head applied to x_{l+1} (the output of block l): its
  loss and KL(final || lens), token means (nostalgebraist 2020; Csordas et al. 2025, arXiv 2505.13898).
  At the last block it is the model's own logits, so its loss is the model's loss.
- update ratios: RMS of the attention and of the MLP update as added to the stream (after the
  residual multiplier) over the RMS of the stream it is added to (Csordas et al. 2025). Pre-norm: the
  attention update is added to x_l, the MLP update to x_l + attn; parallel residual: both to x_l;
  post-norm: to x_l and to norm1(x_l + attn).
- effective depth: greedy removal of the block whose removal raises the loss least, repeated while the
  total increase stays within `tolerance` nats.

Cost, in block forwards per window: the pass that records the stream is L; each dropped block or pair
resumes from the recorded x_l and runs the blocks after it (at most one model forward each, L^2/2 in
all). The greedy search's first round is the drop-a-layer losses; each later round walks the stream of
the kept blocks once and resumes each candidate's trial from that candidate's input, so a round over k
candidates costs about k + k^2/2 block forwards (at most about L^3/6 in all when it removes everything,
nothing beyond the report when it removes nothing).

Every token mean (losses, KL, cosines) is weighted by `weights` (N, T), normalised to sum to 1: by
default every position of every window counts the same; a run's validation windows weight each slice by
its validation tokens, as the trainer's `evaluate` does, and a position without a target (`IGNORE`, a
dense probe's unscored positions) weighs 0. The update ratios weight each batch by its share of the
weights. Losses are next-token cross-entropy in nats. Shapes: N windows, B batch, T positions, D d_model,
V vocab.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from depthwidth.data.hops import IGNORE
from depthwidth.diagnose.limits import DEFAULT_TOLERANCE
from depthwidth.errors import UserError
from depthwidth.model.transformer import Block, Transformer

#: distances n of the angular distance between x_l and x_{l+n}
ANGULAR_STEPS = (1, 2, 4)


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerReport:
    """Per-block measurements; every list has one entry per block, in order."""

    n_layers: int
    windows: int
    tokens: int  # positions with a weight above 0
    loss: float  # the model's loss (nats per token)
    drop_increase: list[float]  # loss with block l skipped minus `loss`
    pair_increase: list[float]  # blocks l and l+1 skipped (L - 1 entries)
    block_influence: list[float]  # 1 - E cos(x_l, x_{l+1})
    angular: dict[int, list[float | None]]  # n -> arccos(cos(x_l, x_{l+n})) / pi
    lens_loss: list[float]  # the head applied to the output of block l
    lens_kl: list[float]  # KL(final || lens), nats per token
    attn_ratio: list[float]  # RMS(attention update) / RMS(stream it is added to)
    mlp_ratio: list[float]
    tolerance: float
    removed: list[int] = field(default_factory=list)  # greedy order
    removed_increase: list[float] = field(default_factory=list)  # total increase after each removal

    @property
    def effective_depth(self) -> int:
        return self.n_layers - len(self.removed)

    @property
    def relative_depth(self) -> list[float]:
        """(l + 1) / L of each block (the output of block l)."""
        return [(i + 1) / self.n_layers for i in range(self.n_layers)]

    def to_dict(self) -> dict[str, Any]:
        return {"n_layers": self.n_layers, "windows": self.windows, "tokens": self.tokens, "loss": self.loss,
                "drop_increase": self.drop_increase, "pair_increase": self.pair_increase,
                "block_influence": self.block_influence,
                "angular_distance": {str(n): v for n, v in self.angular.items()},
                "lens_loss": self.lens_loss, "lens_kl": self.lens_kl, "attn_ratio": self.attn_ratio,
                "mlp_ratio": self.mlp_ratio, "tolerance": self.tolerance,
                "effective_depth": self.effective_depth, "removed": self.removed,
                "removed_increase": self.removed_increase}


def _rope(model: Transformer):
    return (model.rope_cos, model.rope_sin) if model.shape.pos == "rope" else None


def embed(model: Transformer, idx: torch.Tensor) -> torch.Tensor:
    """x_0 of `Transformer.forward` (eval mode: no dropout)."""
    T = idx.shape[1]
    if T > model.shape.max_seq_len:
        raise ValueError(f"sequence of {T} tokens exceeds max_seq_len={model.shape.max_seq_len} of this shape")
    x = model.embed(idx)  # (B, T, D)
    if model.pos_embed is not None:
        x = x + model.pos_embed(torch.arange(T, device=idx.device))
    return x


def head_logits(model: Transformer, x: torch.Tensor) -> torch.Tensor:
    """The end of `Transformer.forward` applied to a residual stream x (B, T, D) -> logits (B, T, V)."""
    if model.final_norm is not None:
        x = model.final_norm(x)
    if model.scaling.logit_mult != 1.0:
        x = x * model.scaling.logit_mult
    return F.linear(x, model.embed.weight) if model.head is None else model.head(x)


def block_parts(block: Block, x: torch.Tensor, *,
                rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, float]:
    """`Block.forward` in its parts: (output, attention update, MLP update, RMS ratio of each) for x (B, T, D);
    the updates are as added to the stream (after the residual multiplier)."""
    s = block.shape
    m = block.residual_mult

    def rms(t: torch.Tensor) -> torch.Tensor:
        return t.float().pow(2).mean().sqrt()

    if s.norm_position == "post":
        a = block.attn(x, rope=rope) * m
        h = block.norm1(x + a)
        u = block.mlp(h) * m
        return block.norm2(h + u), a, u, float(rms(a) / rms(x)), float(rms(u) / rms(h))
    if s.parallel_residual:
        a = block.attn(block.norm1(x), rope=rope) * m
        u = block.mlp(block.norm2(x)) * m
        return x + (a + u), a, u, float(rms(a) / rms(x)), float(rms(u) / rms(x))
    a = block.attn(block.norm1(x), rope=rope) * m
    h = x + a
    u = block.mlp(block.norm2(h)) * m
    return h + u, a, u, float(rms(a) / rms(x)), float(rms(u) / rms(h))


def run_blocks(model: Transformer, x: torch.Tensor, *, start: int = 0,
               skip: frozenset[int] = frozenset()) -> torch.Tensor:
    """The stream after the last block, from x (B, T, D) the input of block `start`, blocks in `skip` passed by."""
    rope = _rope(model)
    for i in range(start, len(model.blocks)):
        if i not in skip:
            x = model.blocks[i](x, rope=rope)
    return x


def _ce(logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted sum (float64 scalar) of the cross-entropy of logits (B, T, V) against targets (B, T), weights
    (B, T); an `IGNORE` target adds nothing."""
    ce = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), reduction="none", ignore_index=IGNORE)
    return (ce.double() * weights.flatten()).sum()


def token_weights(targets: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """float64 (N, T) weights summing to 1: `weights` normalised (default: every position the same), 0 where
    the target is `IGNORE`."""
    w = torch.ones(targets.shape, dtype=torch.float64) if weights is None else weights.to(torch.float64)
    if w.shape != targets.shape or not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError(f"weights {tuple(w.shape)} must be finite, >= 0 and shaped like targets "
                         f"{tuple(targets.shape)}")
    w = torch.where(targets == IGNORE, torch.zeros_like(w), w)
    total = float(w.sum())
    if total <= 0:
        raise UserError("no position of the windows has a target to score (every weight is 0)")
    return w / total


def _batches(inputs: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor,
             batch_size: int) -> Iterable[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    for i in range(0, inputs.shape[0], batch_size):
        yield inputs[i : i + batch_size], targets[i : i + batch_size], weights[i : i + batch_size]


@torch.no_grad()
def loss_without(model: Transformer, *, inputs: torch.Tensor, targets: torch.Tensor, skip: Iterable[int] = (),
                 batch_size: int = 8, weights: torch.Tensor | None = None) -> float:
    """Mean loss (nats per token, weighted by `weights`: see the module docstring) of `model` with the blocks
    in `skip` removed, over windows (N, T)."""
    skip = frozenset(skip)
    w = token_weights(targets, weights)
    total = 0.0
    for x_in, y, wb in _batches(inputs, targets, w, batch_size):
        total += float(_ce(head_logits(model, run_blocks(model, embed(model, x_in), skip=skip)), y, wb))
    return total


@torch.no_grad()
def trial_losses(model: Transformer, *, inputs: torch.Tensor, targets: torch.Tensor, removed: Iterable[int],
                 candidates: Iterable[int], batch_size: int = 8,
                 weights: torch.Tensor | None = None) -> dict[int, float]:
    """For each candidate j, `loss_without(skip=[*removed, j])`: the stream through the kept blocks is walked
    once per batch and each trial resumes from the input of its block (the same operations, so the same
    numbers, as a whole forward without those blocks)."""
    skip = frozenset(removed)
    rope = _rope(model)
    out = {j: 0.0 for j in candidates}
    for x_in, y, w in _batches(inputs, targets, token_weights(targets, weights), batch_size):
        x = embed(model, x_in)  # (B, T, D), the input of block i below
        for i, block in enumerate(model.blocks):
            if i in out:
                out[i] += float(_ce(head_logits(model, run_blocks(model, x, start=i + 1, skip=skip)), y, w))
            if i not in skip:
                x = block(x, rope=rope)
    return out


@torch.no_grad()
def effective_depth(model: Transformer, *, inputs: torch.Tensor, targets: torch.Tensor, base: float,
                    tolerance: float = DEFAULT_TOLERANCE, batch_size: int = 8, weights: torch.Tensor | None = None,
                    first: list[float] | None = None) -> tuple[list[int], list[float]]:
    """Greedy removal (see the module docstring): the removed blocks in order and the total loss increase
    over `base` after each. Stops before the removal that would take the increase past `tolerance`.
    `first`: the loss with each block alone removed, when known (the report's drop-a-layer losses)."""
    removed: list[int] = []
    increases: list[float] = []
    remaining = list(range(len(model.blocks)))
    while remaining:
        if first is not None and not removed:
            trials = dict(enumerate(first))
        else:
            trials = trial_losses(model, inputs=inputs, targets=targets, removed=removed, candidates=remaining,
                                  batch_size=batch_size, weights=weights)
        best = min(trials, key=lambda j: (trials[j], j))
        if trials[best] - base > tolerance:
            break
        removed.append(best)
        increases.append(trials[best] - base)
        remaining.remove(best)
    return removed, increases


def check_windows(model: Transformer, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    if not model.shape.lm_head:
        raise UserError(f"{model.shape.label()} has no language-model head; its layers cannot be inspected by loss")
    if inputs.ndim != 2 or inputs.shape != targets.shape or inputs.numel() == 0:
        raise ValueError(f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must be equal (N, T), "
                         "N, T > 0")


@torch.no_grad()
def layer_report(model: Transformer, *, inputs: torch.Tensor, targets: torch.Tensor,
                 tolerance: float = DEFAULT_TOLERANCE, batch_size: int = 8, greedy: bool = True,
                 weights: torch.Tensor | None = None) -> LayerReport:
    """Every measurement of the module docstring for `model` on windows `inputs`, `targets` (N, T) int64,
    each position weighted by `weights` (N, T) (default: all the same)."""
    check_windows(model, inputs, targets)
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise UserError(f"tolerance={tolerance!r} must be a finite number of nats >= 0")
    w = token_weights(targets, weights)
    was_training = model.training
    model.eval()
    try:
        return _report(model, inputs=inputs, targets=targets, weights=w, tolerance=tolerance, batch_size=batch_size,
                       greedy=greedy)
    finally:
        model.train(was_training)


def _report(model: Transformer, *, inputs, targets, weights, tolerance: float, batch_size: int,
            greedy: bool) -> LayerReport:
    L = len(model.blocks)
    rope = _rope(model)
    base = 0.0
    drop = [0.0] * L
    pair = [0.0] * max(L - 1, 0)
    cos_sum = {n: [0.0] * L for n in ANGULAR_STEPS}  # weighted sums over tokens of cos(x_l, x_{l+n})
    ang_sum = {n: [0.0] * L for n in ANGULAR_STEPS}
    lens = [0.0] * L
    kl = [0.0] * L
    attn = [0.0] * L
    mlp = [0.0] * L
    for x_in, y, w in _batches(inputs, targets, weights, batch_size):
        share = float(w.sum())  # this batch's weight in a token mean
        xs = [embed(model, x_in)]  # x_0 .. x_L, each (B, T, D)
        for i, block in enumerate(model.blocks):
            out, _, _, ra, rm = block_parts(block, xs[-1], rope=rope)
            xs.append(out)
            attn[i] += ra * share
            mlp[i] += rm * share
        final = head_logits(model, xs[-1])  # (B, T, V)
        base += float(_ce(final, y, w))
        log_final = final.float().log_softmax(-1)  # (B, T, V)
        for i in range(L):
            lens_logits = final if i == L - 1 else head_logits(model, xs[i + 1])
            lens[i] += float(_ce(lens_logits, y, w))
            log_lens = lens_logits.float().log_softmax(-1)
            kl_tok = (log_final.exp() * (log_final - log_lens)).sum(-1)  # (B, T)
            kl[i] += float((kl_tok.double() * w).sum())
            drop[i] += float(_ce(head_logits(model, run_blocks(model, xs[i], start=i + 1)), y, w))
            if i < L - 1:
                pair[i] += float(_ce(head_logits(model, run_blocks(model, xs[i], start=i + 2)), y, w))
            for n in ANGULAR_STEPS:
                if i + n <= L:
                    c = F.cosine_similarity(xs[i].float(), xs[i + n].float(), dim=-1).clamp(-1.0, 1.0)  # (B, T)
                    cos_sum[n][i] += float((c.double() * w).sum())
                    ang_sum[n][i] += float(((torch.arccos(c) / math.pi).double() * w).sum())
    removed, increases = [], []
    if greedy:
        removed, increases = effective_depth(model, inputs=inputs, targets=targets, base=base, tolerance=tolerance,
                                             batch_size=batch_size, weights=weights, first=drop)
    return LayerReport(
        n_layers=L, windows=inputs.shape[0], tokens=int((weights > 0).sum()), loss=base,
        drop_increase=[d - base for d in drop], pair_increase=[p - base for p in pair],
        block_influence=[1.0 - c for c in cos_sum[1]],
        angular={n: [v if i + n <= L else None for i, v in enumerate(ang_sum[n])] for n in ANGULAR_STEPS},
        lens_loss=lens, lens_kl=kl, attn_ratio=attn, mlp_ratio=mlp,
        tolerance=tolerance, removed=removed, removed_increase=increases)


def report_bytes(model: Transformer, *, batch_size: int, seq_len: int) -> int:
    """fp32 bytes the report holds at once beyond the weights: the recorded stream (L + 1 tensors of
    B x T x D) and a few B x T x V logit tensors."""
    s = model.shape
    return 4 * batch_size * seq_len * ((s.n_layers + 3) * s.d_model + 4 * s.vocab_size)


__all__ = ["ANGULAR_STEPS", "DEFAULT_TOLERANCE", "LayerReport", "block_parts", "effective_depth", "embed",
           "head_logits", "layer_report", "loss_without", "report_bytes", "run_blocks", "token_weights",
           "trial_losses"]
