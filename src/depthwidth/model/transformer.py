"""One readable Transformer built from a `Shape`: decoder (causal) or encoder (bidirectional).

Covers every option of `Shape`: pre- or post-norm blocks, learned / rotary / no positions,
GELU (tanh) / ReLU / SwiGLU MLPs, LayerNorm / RMSNorm, biases as configured, GQA/MQA, tied or
untied head (or none), GPT-NeoX parallel residual, GPT-2 depth-scaled residual init.
A parametrization (`depthwidth.shapes.parametrization.Multipliers`: muP, CompleteP, depth-muP) sets the
init stds, the residual-branch multiplier, the output-logit multiplier and the attention scale; SP, the
default, applies none of them (no extra op), so SP numbers are those of the model before parametrizations.
Attention runs through PyTorch's fused `scaled_dot_product_attention` ("sdpa") or an explicit
eager path ("eager") whose ops FLOP counters and saved-tensor hooks can see one by one.

Shapes in comments: B batch, T sequence, D d_model, Hq/Hk query/kv heads, Dh head_dim, V vocab.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from depthwidth.model.cache import KVCache
from depthwidth.model.kernels import ATTN_IMPLS
from depthwidth.shapes.parametrization import Multipliers, multipliers
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape


def make_norm(shape: Shape) -> nn.Module:
    if shape.norm == "rmsnorm":
        return nn.RMSNorm(shape.d_model, eps=shape.norm_eps)
    return nn.LayerNorm(shape.d_model, eps=shape.norm_eps, bias=shape.norm_bias)


def rope_tables(shape: Shape) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (max_seq_len, head_dim), rotate-half layout (as Llama/GPT-NeoX in HF)."""
    half = shape.head_dim // 2
    inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(shape.max_seq_len, dtype=torch.float32), inv_freq)  # (S, Dh/2)
    angles = torch.cat([angles, angles], dim=-1)  # (S, Dh)
    return angles.cos(), angles.sin()


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, not called where it returns `x` itself (p = 0, or evaluation)."""
    return F.dropout(x, p=p, training=True) if p and training else x


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (B, H, T, Dh); cos/sin: (T, Dh)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return (x * cos + rotated * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, shape: Shape, *, attn_impl: str, dropout: float, scale: float | None = None) -> None:
        super().__init__()
        self.shape = shape
        self.attn_impl = attn_impl
        self.dropout = dropout
        self.scale = scale  # of q.k; None: 1/sqrt(head_dim) (muP/CompleteP: 1/head_dim)
        self.sizes = [shape.q_dim, shape.kv_dim, shape.kv_dim]  # q, k, v columns of the fused projection
        self.qkv = nn.Linear(shape.d_model, shape.q_dim + 2 * shape.kv_dim, bias=shape.qkv_bias)
        self.out = nn.Linear(shape.q_dim, shape.d_model, bias=shape.linear_bias)
        self.out.residual_out = True  # marks depth-scaled init

    def forward(
        self,
        x: torch.Tensor,  # (B, T, D)
        *,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        s = self.shape
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.sizes, dim=-1)
        q = q.view(B, T, s.n_heads, s.head_dim).transpose(1, 2)  # (B, Hq, T, Dh)
        k = k.view(B, T, s.n_kv_heads, s.head_dim).transpose(1, 2)  # (B, Hk, T, Dh)
        v = v.view(B, T, s.n_kv_heads, s.head_dim).transpose(1, 2)  # (B, Hk, T, Dh)
        start = cache.length if cache is not None else 0
        if rope is not None:
            cos, sin = rope[0][start : start + T], rope[1][start : start + T]
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, Hk, start+T, Dh)
        y = self._attend(q, k, v, start=start)  # (B, Hq, T, Dh)
        y = y.transpose(1, 2).reshape(B, T, self.sizes[0])
        return dropout(self.out(y), self.dropout, self.training)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, start: int) -> torch.Tensor:
        s = self.shape
        T, S = q.shape[2], k.shape[2]
        causal = s.causal and T > 1
        mask = None
        if causal and start > 0:  # a chunk after cached tokens: bottom-right aligned causal mask
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
            causal = False
        p = self.dropout if self.training else 0.0
        if self.attn_impl == "sdpa":
            extra = {} if self.scale is None else {"scale": self.scale}
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, enable_gqa=s.n_kv_heads != s.n_heads, **extra
            )
        if s.n_kv_heads != s.n_heads:
            rep = s.n_heads // s.n_kv_heads
            k = k.repeat_interleave(rep, dim=1)  # (B, Hq, S, Dh)
            v = v.repeat_interleave(rep, dim=1)
        scale = 1.0 / math.sqrt(s.head_dim) if self.scale is None else self.scale
        scores = (q @ k.transpose(-2, -1)) * scale  # (B, Hq, T, S)
        if causal:
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(dim=-1), p=p, training=self.training)
        return weights @ v  # (B, Hq, T, Dh)


class MLP(nn.Module):
    def __init__(self, shape: Shape, *, dropout: float) -> None:
        super().__init__()
        self.ffn = shape.ffn
        self.dropout = dropout
        bias = shape.linear_bias
        self.up = nn.Linear(shape.d_model, shape.d_ff, bias=bias)
        self.gate = nn.Linear(shape.d_model, shape.d_ff, bias=bias) if shape.ffn == "swiglu" else None
        self.down = nn.Linear(shape.d_ff, shape.d_model, bias=bias)
        self.down.residual_out = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, T, D)
        if self.gate is not None:
            h = F.silu(self.gate(x)) * self.up(x)  # (B, T, F)
        elif self.ffn == "relu":
            h = F.relu(self.up(x))
        else:
            h = F.gelu(self.up(x), approximate="tanh")
        return dropout(self.down(h), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, shape: Shape, *, attn_impl: str, dropout: float, attn_scale: float | None = None,
                 residual_mult: float = 1.0) -> None:
        super().__init__()
        self.shape = shape
        self.residual_mult = residual_mult  # CompleteP / depth-muP: m_L^-alpha on each branch
        self.norm1 = make_norm(shape)
        self.attn = Attention(shape, attn_impl=attn_impl, dropout=dropout, scale=attn_scale)
        self.norm2 = make_norm(shape)
        self.mlp = MLP(shape, dropout=dropout)

    def _branch(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.residual_mult == 1.0 else y * self.residual_mult

    def forward(self, x: torch.Tensor, *, rope, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        if self.shape.norm_position == "post":  # nn.TransformerEncoderLayer(norm_first=False)
            x = self.norm1(x + self._branch(self.attn(x, rope=rope, cache=cache, layer=layer)))
            return self.norm2(x + self._branch(self.mlp(x)))
        if self.shape.parallel_residual:  # GPT-NeoX: both branches read the same input
            if self.residual_mult != 1.0:
                return x + (self.attn(self.norm1(x), rope=rope, cache=cache, layer=layer)
                            + self.mlp(self.norm2(x))) * self.residual_mult
            return x + self.attn(self.norm1(x), rope=rope, cache=cache, layer=layer) + self.mlp(self.norm2(x))
        x = x + self._branch(self.attn(self.norm1(x), rope=rope, cache=cache, layer=layer))
        return x + self._branch(self.mlp(self.norm2(x)))


class Transformer(nn.Module):
    """The language model of a `Shape`. `forward(idx, targets)` returns (logits, loss). `scaling` is the
    run's parametrization (`depthwidth.shapes.parametrization.multipliers`); None is SP with `init_std`."""

    def __init__(self, shape: Shape, *, attn_impl: str = "sdpa", dropout: float = 0.0, init_std: float = 0.02,
                 scaling: Multipliers | None = None):
        super().__init__()
        if scaling is None:
            scaling = multipliers("sp", d_model=shape.d_model, n_layers=shape.n_layers, head_dim=shape.head_dim,
                                  init_std=init_std)
        self.scaling = scaling
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl={attn_impl!r} is not allowed; expected one of {', '.join(ATTN_IMPLS)}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout!r} must be in [0, 1)")
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos_embed = nn.Embedding(shape.max_seq_len, shape.d_model) if shape.pos == "learned" else None
        self.dropout = dropout
        self.blocks = nn.ModuleList(Block(shape, attn_impl=attn_impl, dropout=dropout, attn_scale=scaling.attn_scale,
                                          residual_mult=scaling.residual_mult) for _ in range(shape.n_layers))
        self.final_norm = make_norm(shape) if shape.final_norm else None
        self.head = None
        if shape.lm_head and not shape.tie_embeddings:
            self.head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        if shape.pos == "rope":
            cos, sin = rope_tables(shape)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.init_weights()

    def init_weights(self) -> None:
        """Normal weights, zero biases, unit norms. SP: std 0.02 everywhere except the residual output
        projections, std / sqrt(2 * n_layers) (GPT-2, Radford et al. 2019, sec. 2.3); a parametrization sets
        the std of the embeddings and head, of the block matrices and of the residual output projections."""
        if self.embed.weight.is_meta:
            return
        s = self.scaling
        for module in self.modules():
            if isinstance(module, nn.Linear):
                if module is self.head:
                    std = s.embed_init_std
                else:
                    std = s.residual_out_init_std if getattr(module, "residual_out", False) else s.hidden_init_std
                nn.init.normal_(module.weight, 0.0, std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, s.embed_init_std)
            elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
                module.reset_parameters()

    def set_attn_impl(self, attn_impl: str) -> None:
        if attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl={attn_impl!r} is not allowed; expected one of {', '.join(ATTN_IMPLS)}")
        for block in self.blocks:
            block.attn.attn_impl = attn_impl

    def forward(
        self,
        idx: torch.Tensor,  # (B, T) token ids
        targets: torch.Tensor | None = None,  # (B, T)
        *,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        T = idx.shape[1]
        start = cache.length if cache is not None else 0
        if start + T > self.shape.max_seq_len:
            raise ValueError(
                f"sequence of {start + T} tokens exceeds max_seq_len={self.shape.max_seq_len} of this shape"
            )
        x = self.embed(idx)  # (B, T, D)
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(start, start + T, device=idx.device))
        x = dropout(x, self.dropout, self.training)
        rope = (self.rope_cos, self.rope_sin) if self.shape.pos == "rope" else None
        for i, block in enumerate(self.blocks):
            x = block(x, rope=rope, cache=cache, layer=i)
        if cache is not None:
            cache.advance(T)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if not self.shape.lm_head:
            return x, None  # encoder without a head: the hidden states
        if self.scaling.logit_mult != 1.0:  # muP/CompleteP: logits / m_N (scaled before the head, as the reference)
            x = x * self.scaling.logit_mult
        # the head is called as a module so that a quantized replacement (int8 dynamic) works too
        logits = F.linear(x, self.embed.weight) if self.head is None else self.head(x)  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def state_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    """Name -> size of every tensor of `Transformer(shape).state_dict()`, allocating nothing: one block and
    the final norm are built on the meta device (their entries repeated for each layer, so a shape claiming
    10^4 layers costs a dict, not a model); the embedding tables and the head, whose initialisation on the
    meta device costs seconds, are written down (`tests` check all of it against the real module)."""
    with torch.device("meta"):
        block = Block(shape, attn_impl="sdpa", dropout=0.0)
        final = make_norm(shape) if shape.final_norm else None
    out: dict[str, tuple[int, ...]] = {"embed.weight": (shape.vocab_size, shape.d_model)}
    if shape.pos == "learned":
        out["pos_embed.weight"] = (shape.max_seq_len, shape.d_model)
    items = list(block.state_dict().items())
    for i in range(shape.n_layers):
        out.update((f"blocks.{i}.{name}", tuple(t.shape)) for name, t in items)
    out.update((f"final_norm.{name}", tuple(t.shape)) for name, t in (final.state_dict().items() if final else ()))
    if shape.lm_head and not shape.tie_embeddings:
        out["head.weight"] = (shape.vocab_size, shape.d_model)
    return out


def model_bytes(shape: Shape) -> int:
    """Bytes `Transformer(shape)` allocates in fp32: its parameters and its RoPE tables (cos and sin,
    max_seq_len x head_dim each). A lower bound of what building it needs."""
    rope = 2 * shape.max_seq_len * shape.head_dim if shape.pos == "rope" else 0
    return 4 * (count_params(shape).total + rope)
