"""A parametrization's forward multipliers folded into the weights, so that a Hugging Face class, which
has none of them, computes the run's logits with its standard forward pass.

muP, CompleteP and depth-muP (`depthwidth.shapes.parametrization.Multipliers`) multiply three places of
the forward pass (`depthwidth.model.transformer`); each is a linear factor next to a linear layer, so
it moves into that layer's weight and bias:

    residual_mult m_r   each residual branch x + m_r * F(x), with F(x) = W_o h + b_o ending in the
                        attention output projection (attn.out) or the MLP down projection (mlp.down):
                            m_r (W_o h + b_o) = (m_r W_o) h + (m_r b_o)
                        Exact for every block form: pre-norm x + m_r F(norm(x)), post-norm
                        norm(x + m_r F(x)) (the factor is inside the norm, on the branch output) and the
                        parallel residual x + m_r (A(norm1 x) + M(norm2 x)) = x + m_r A + m_r M.
    logit_mult m_l      logits = W_head (m_l * z), z the final norm's output.
                        Untied head: (m_l W_head) z.
                        Tied head (W_head is the token embedding, which also feeds the input, so it
                        cannot change): z = g * xhat + b, hence m_l z = (m_l g) * xhat + (m_l b) - the
                        final norm's gain and bias (LayerNorm or RMSNorm, whose xhat does not depend on
                        g or b). A tied head without a final norm has no such layer and is refused.
    attn_scale s        softmax(s q.k) instead of the class's softmax(q.k / sqrt(Dh)):
                            s q.k = ((s sqrt(Dh)) q).k / sqrt(Dh)
                        so the query rows of the fused q/k/v projection (rows 0 .. q_dim, our layout:
                        [all query heads; all key heads; all value heads]) and their biases are scaled by
                        c = s sqrt(Dh) (1/sqrt(Dh) for s = 1/Dh). Exact with RoPE too: the rotation is
                        linear and acts per position, R(c q) = c R(q).

No Hugging Face config key is needed: every class keeps its standard attention scale 1/sqrt(Dh)
(GPT-2's `scale_attn_weights`), and the folded weights are those of an SP model computing the same
function, which is also what `depthwidth.hfio.load` reads back. The result is exact up to fp32 rounding
(a product reassociated). `Folded.record` says what was folded, for config.json's "depthwidth" record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from depthwidth.errors import UserError
from depthwidth.shapes.parametrization import Multipliers
from depthwidth.shapes.shape import Shape

#: our block modules that end a residual branch (each branch's last linear layer)
BRANCH_ENDS = ("attn.out", "mlp.down")


@dataclass(frozen=True, kw_only=True, slots=True)
class Folded:
    """Our state dict with the multipliers in the weights, and what was folded where."""

    state: dict[str, torch.Tensor]
    record: dict[str, Any]  # config.json "depthwidth" -> "parametrization"


def _factor(name: str, value: float, parametrization: str) -> float:
    if not math.isfinite(value):
        raise UserError(f"cannot export a parametrization={parametrization!r} run: its {name}={value!r} is not "
                        "finite, and no weight can hold it")
    return float(value)


def _scaled(state: dict[str, torch.Tensor], names: list[str], factor: float, rows: int | None = None) -> None:
    """Multiply `state[name]` (or its first `rows` rows) by `factor`, in new tensors, for each name."""
    for name in names:
        t = state[name].detach().clone()
        if rows is None:
            t.mul_(factor)
        else:
            t[:rows].mul_(factor)
        state[name] = t


def _params(state: dict[str, torch.Tensor], module: str) -> list[str]:
    return [f"{module}.{p}" for p in ("weight", "bias") if f"{module}.{p}" in state]


def fold_multipliers(state: dict[str, torch.Tensor], shape: Shape, multipliers: Multipliers) -> Folded:
    """`state` (our names, of `shape`) with `multipliers`' residual, logit and attention factors folded in
    (see the module docstring); the input is not modified. SP returns the same tensors. Raises a one-line
    UserError naming what no weight can hold: a logit multiplier with a tied head and no final norm, or a
    factor that is not finite."""
    p = multipliers.parametrization
    out = dict(state)
    folded: dict[str, Any] = {}
    residual = _factor("residual_mult", multipliers.residual_mult, p)
    if residual != 1.0:
        names = [n for i in range(shape.n_layers) for m in BRANCH_ENDS for n in _params(state, f"blocks.{i}.{m}")]
        _scaled(out, names, residual)
        folded["residual_mult"] = {"value": residual, "into": "attn.out and mlp.down weights and biases"}
    logit = _factor("logit_mult", multipliers.logit_mult, p)
    if logit != 1.0 and shape.lm_head:
        if not shape.tie_embeddings:
            _scaled(out, ["head.weight"], logit)
            into = "head weight (untied)"
        elif shape.final_norm:
            _scaled(out, _params(state, "final_norm"), logit)
            into = "final_norm gain and bias (the head is tied to the token embedding)"
        else:
            raise UserError(f"cannot export {shape.label()} trained with parametrization={p!r}: its logit "
                            f"multiplier {logit:g} has no weight to go into with tie_embeddings=True and "
                            "final_norm=False (it needs an untied head or a final norm)")
        folded["logit_mult"] = {"value": logit, "into": into}
    if multipliers.attn_scale is not None:
        scale = _factor("attn_scale", multipliers.attn_scale, p)
        q_factor = scale * math.sqrt(shape.head_dim)  # s q.k = (c q).k / sqrt(Dh)
        if q_factor != 1.0:
            names = [n for i in range(shape.n_layers) for n in _params(state, f"blocks.{i}.attn.qkv")]
            _scaled(out, names, q_factor, rows=shape.q_dim)
            folded["attn_scale"] = {"value": scale, "query_factor": q_factor,
                                    "into": "query rows of attn.qkv weight and bias (the class divides by "
                                            "sqrt(head_dim))"}
    record = {"name": p, "width_mult": multipliers.width_mult, "depth_mult": multipliers.depth_mult,
              "alpha": multipliers.alpha, "folded": folded}
    return Folded(state=out, record=record)


__all__ = ["BRANCH_ENDS", "Folded", "fold_multipliers"]
