"""Exact parameter counts of a `Shape`, by component.

The count is the number of trainable scalars of the module `depthwidth.model.Transformer(shape)`
builds, which tests assert equal to `sum(p.numel() for p in model.parameters())` for every preset,
for random shapes, and for PyTorch's own `nn.TransformerEncoder`.

Per block (d = d_model, q = n_heads*head_dim, k = n_kv_heads*head_dim, f = d_ff):
    attention  d*q + 2*d*k + q*d          (+ q + 2k biases with bias in {"all","qkv"}, + d with "all")
    mlp        2*d*f (gelu/relu) or 3*d*f (swiglu)   (+ f + d, or 2f + d, biases with "all")
    norms      2 norms of d weights       (+ d biases each for LayerNorm with bias="all")
With q = k = d and f = 4d this is 12*d^2 + O(d) per block: Kaplan et al. 2020, eq. 2.1, N = 12*L*d^2.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.shapes.shape import Shape


@dataclass(frozen=True, kw_only=True, slots=True)
class ParamBreakdown:
    """Trainable parameters by component (all counts are exact integers)."""

    embedding: int  # token embedding table, vocab_size * d_model
    position: int  # learned position table, max_seq_len * d_model (0 for rope/none)
    attention: int  # all blocks: q, k, v, o projections and their biases
    mlp: int  # all blocks: MLP matrices and biases
    norms: int  # all blocks' norms plus the final norm
    head: int  # untied LM head, vocab_size * d_model (0 when tied or absent)
    per_layer: int  # one block: attention + mlp + its norms
    n_layers: int
    d_model: int

    @property
    def total(self) -> int:
        return self.embedding + self.position + self.attention + self.mlp + self.norms + self.head

    @property
    def non_embedding(self) -> int:
        """Kaplan et al. 2020 convention: everything except the vocabulary and position matrices
        (token embedding, learned positions, and an untied output head). Biases and norms count."""
        return self.total - self.embedding - self.position - self.head

    @property
    def blocks(self) -> int:
        """Parameters inside the n_layers blocks (excludes the final norm)."""
        return self.n_layers * self.per_layer

    @property
    def per_layer_constant(self) -> float:
        """c in per_layer ~ c * d_model^2 (12 for a standard GELU block, ~12 for default SwiGLU,
        less with GQA). It is what the rule P ~ c * L * H^2 uses."""
        return self.per_layer / self.d_model**2

    def to_dict(self) -> dict[str, int | float]:
        return {
            "total": self.total,
            "non_embedding": self.non_embedding,
            "embedding": self.embedding,
            "position": self.position,
            "attention": self.attention,
            "mlp": self.mlp,
            "norms": self.norms,
            "head": self.head,
            "per_layer": self.per_layer,
            "per_layer_constant": self.per_layer_constant,
        }


def attention_params_per_layer(shape: Shape) -> int:
    d, q, k = shape.d_model, shape.q_dim, shape.kv_dim
    count = d * q + 2 * d * k + q * d
    if shape.qkv_bias:
        count += q + 2 * k
    if shape.linear_bias:
        count += d
    return count


def mlp_params_per_layer(shape: Shape) -> int:
    d, f = shape.d_model, shape.d_ff
    n_in = 2 if shape.ffn == "swiglu" else 1
    count = (n_in + 1) * d * f
    if shape.linear_bias:
        count += n_in * f + d
    return count


def norm_params(shape: Shape) -> int:
    """Parameters of one norm layer."""
    return shape.d_model * (2 if shape.norm_bias else 1)


def count_params(shape: Shape) -> ParamBreakdown:
    """Exact trainable-parameter count of `shape` by component."""
    attn = attention_params_per_layer(shape)
    mlp = mlp_params_per_layer(shape)
    per_layer = attn + mlp + 2 * norm_params(shape)
    embedding = shape.vocab_size * shape.d_model
    head = embedding if shape.lm_head and not shape.tie_embeddings else 0
    return ParamBreakdown(
        embedding=embedding,
        position=shape.max_seq_len * shape.d_model if shape.pos == "learned" else 0,
        attention=shape.n_layers * attn,
        mlp=shape.n_layers * mlp,
        norms=shape.n_layers * 2 * norm_params(shape) + (norm_params(shape) if shape.final_norm else 0),
        head=head,
        per_layer=per_layer,
        n_layers=shape.n_layers,
        d_model=shape.d_model,
    )
