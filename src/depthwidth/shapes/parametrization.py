"""How a run's initialisation, learning rates and forward multipliers scale with width and depth.

`PARAMETRIZATIONS` names the supported schemes: "sp" (standard parametrization, what the trainer has
always done), "mup" (width only: Yang et al. 2022, arXiv 2203.03466), "completep" (width and depth with
alpha = 1: Dey et al. 2025, arXiv 2505.01618) and "depth-mup" (width and depth with alpha = 1/2: Yang
et al. 2023, arXiv 2310.02244; Bordelon et al. 2023, arXiv 2309.16620). Pure: no torch.

`multipliers(...)` is the one place every factor is computed. With m_N = d_model / base_width and
m_L = n_layers / base_depth, the rules are CompleteP's Table 1 (arXiv 2505.01618), cross-checked against
the authors' reference implementation (the `completep` branch of EleutherAI/nanoGPT-mup, `model.py`:
`GPT.__init__` for init, `Block.forward` for the residual scaling, `configure_optimizers` for the
groups, the LR scales, AdamW eps and weight decay):

    hidden matrices (q/k/v, attention out, MLP up/gate/down)
        init variance        sigma^2 / m_N                         Table 1 "hidden init. var."
        AdamW LR             eta * m_N^-1 * m_L^(alpha-1)          Table 1 "hidden LR (AdamW)"
        weight decay         lambda * m_N  (eta * lambda: width-    Table 1 "hidden WD (AdamW)"
                             free; with alpha = 1 also depth-free)
    hidden biases, hidden norm gains and biases
        AdamW LR             eta * m_L^(alpha-1)                    Table 1 "LN / bias LR"
    residual branches        x + m_L^-alpha * F(x)                  eq. (1) / Table 1 "residual branch"
    output logits            W_out h / m_N                          Table 1 "unembedding multiplier"
    attention logits         q.k / head_dim  (not 1/sqrt(head_dim)) Table 1 "attention logit scale"
    AdamW epsilon            eps * m_N^-1 * m_L^-alpha              Table 1 "AdamW eps" (the reference
                                                                    scales the optimizer's one eps)
    embeddings (token and position tables, the untied head, the final norm)
        init sigma^2, LR eta, input multiplier 1                    Table 1 "embedding" rows (constant)

"mup" is the same rules with the depth factors held at 1 (m_L^... = 1, no residual multiplier): the
width-only scheme of the reference's `mup_enabled` path, except that eps (/ m_N) and hidden weight decay
(* m_N) are scaled by width here as under CompleteP, where the reference's muP path leaves both at base.
The reference scales AdamW eps for every group alike, and so does this module. Under every non-SP scheme the residual output projections lose GPT-2's extra
1/sqrt(2 n_layers) init factor (the reference re-initialises them with sigma / sqrt(m_N) like every hidden
matrix; depth is handled by the residual multiplier). With base sizes equal to the shape's own (m_N = m_L = 1)
all LR, eps and decay factors are 1, but attention still uses 1/head_dim and the output projections sigma.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.serial import Serializable

PARAMETRIZATIONS = ("sp", "mup", "completep", "depth-mup")

#: residual exponent alpha of each depth-aware scheme (Table 1 / eq. 1 of arXiv 2505.01618)
ALPHA = {"completep": 1.0, "depth-mup": 0.5}

#: the parameter groups a model's tensors belong to (see `depthwidth.train.optim.param_role`)
ROLES = ("embedding", "hidden", "hidden_vector", "final_norm", "head")


@dataclass(frozen=True, slots=True)
class Multipliers(Serializable):
    """Every factor of one (parametrization, width, depth). LR, weight-decay and eps factors multiply the
    run's `lr`, `weight_decay` and `eps`; init stds are absolute (they include the base `init_std`)."""

    parametrization: str
    width_mult: float  # m_N = d_model / base_width
    depth_mult: float  # m_L = n_layers / base_depth
    alpha: float  # residual exponent (0: no depth scaling)
    embed_init_std: float  # token/position tables and an untied head
    hidden_init_std: float  # every block matrix except the residual output projections
    residual_out_init_std: float  # attention out and MLP down
    residual_mult: float  # multiplies each residual branch
    logit_mult: float  # multiplies the output logits
    attn_scale: float | None  # None: PyTorch's default 1/sqrt(head_dim)
    lr: dict[str, float]  # role -> LR factor
    weight_decay: dict[str, float]  # role -> weight-decay factor
    eps: float  # AdamW eps factor (every group)

    @property
    def is_sp(self) -> bool:
        return self.parametrization == "sp"


def multipliers(parametrization: str, *, d_model: int, n_layers: int, head_dim: int,
                base_width: int | None = None, base_depth: int | None = None, init_std: float = 0.02,
                norm_position: str = "pre") -> Multipliers:
    """The factors of `parametrization` for a model of `d_model` x `n_layers` (see the module docstring).
    `base_width` / `base_depth` default to the model's own sizes (m_N = m_L = 1)."""
    if parametrization not in PARAMETRIZATIONS:
        raise UserError(f"parametrization={parametrization!r} is not allowed; expected one of "
                        f"{', '.join(PARAMETRIZATIONS)}")
    m_n = d_model / (base_width or d_model)
    m_l = n_layers / (base_depth or n_layers)
    ones = dict.fromkeys(ROLES, 1.0)
    if parametrization == "sp":  # GPT-2 init (Radford et al. 2019, sec. 2.3), no multiplier at all
        return Multipliers(parametrization, m_n, m_l, 0.0, init_std, init_std, init_std / math.sqrt(2 * n_layers),
                           1.0, 1.0, None, ones, ones, 1.0)
    alpha = ALPHA.get(parametrization, 0.0)
    if alpha and norm_position != "pre":
        raise UserError(f"parametrization={parametrization!r} scales pre-norm residual branches; this shape is "
                        f"norm_position={norm_position!r} (use sp or mup)")
    depth_lr = m_l ** (alpha - 1) if alpha else 1.0  # Table 1: hidden and LN/bias LR * m_L^(alpha-1)
    hidden_std = init_std / math.sqrt(m_n)  # Table 1: hidden init variance sigma^2 / m_N
    lr = {**ones, "hidden": depth_lr / m_n, "hidden_vector": depth_lr}
    weight_decay = {**ones, "hidden": m_n}  # Table 1: hidden WD lambda * m_N
    return Multipliers(parametrization, m_n, m_l, alpha, init_std, hidden_std, hidden_std,
                       residual_mult=m_l ** -alpha,  # eq. (1): x + m_L^-alpha F(x)
                       logit_mult=1.0 / m_n,  # Table 1: output logits / m_N
                       attn_scale=1.0 / head_dim,  # Table 1: attention logits 1/d_head
                       lr=lr, weight_decay=weight_decay,
                       eps=(1.0 / m_n) * m_l ** -alpha)  # Table 1: AdamW eps * m_N^-1 m_L^-alpha


__all__ = ["ALPHA", "PARAMETRIZATIONS", "ROLES", "Multipliers", "multipliers"]
