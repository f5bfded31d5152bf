"""Activation memory: the bytes each op of `depthwidth.model.Transformer` keeps for backward.

Starting point: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", sec. 4: one GPT block in fp16 with dropout keeps s*b*h*(34 + 5*a*s/h) bytes; with tensor
parallelism t, s*b*h*(10 + 24/t + 5*a*s/(h*t)); with sequence parallelism as well,
s*b*h*(34 + 5*a*s/h)/t; selective recomputation drops the 5*a*s/h term; full recomputation keeps
only the layer input, 2*s*b*h. Here the count is rebuilt term by term from what each op of *our*
module saves (found with `torch.autograd.graph.saved_tensors_hooks`, storage shared between saved
tensors counted once), so GQA, SwiGLU, RMSNorm, RoPE, fused attention and autocast follow.

Per block, per token (d = d_model, q = n_heads*head_dim, k = n_kv_heads*head_dim, f = d_ff,
A = n_heads, s = seq_len; r = residual-stream bytes, c = compute/activation bytes, m = bytes per
dropped element):
    norm input + stats   layernorm: r*d + 2 stats (mean, rstd); rmsnorm fused: r*d + 4 (rstd);
                         rmsnorm composite (PyTorch's decomposed kernel, which computes in fp32):
                         4*d (the input upcast) + 4*d (x*rstd, for the weight) + 4.   Two norms.
    qkv input            c*d  (the norm output, or its autocast copy)
    eager attention      q, k, v contiguous copies, k and v repeated to all A heads: 3*c*q;
                         softmax output c*A*s; one bool causal mask, s*s bytes per layer;
                         with dropout: mask m*A*s and dropout output c*A*s
    fused attention      (F.scaled_dot_product_attention, flash) the qkv output c*(q+2k) (q, k, v
                         are views of it); with RoPE also the rotated q, k: c*(q+k);
                         logsumexp 4*A (fp32); output c*q (also the out-projection input)
    out-proj input       c*q (eager: the transpose-reshape copy; fused: shared with the output)
    dropout masks        m*d after the out projection and m*d after the MLP
    mlp input            c*d; twice for SwiGLU under autocast (gate and up each cast the input)
    mlp hidden           gelu 2*c*f (input, output); relu c*f (output only, shared with the
                         down projection); swiglu 4*c*f (gate out, silu out, up out, product)
RoPE multiplies by cos/sin buffers (constants, not activations) and saves nothing else.
With GPT-2's block in fp16 (r = c = 2, m = 1, eager, q = k = d, f = 4d, dropout) the d-terms add
up to 34*d and the score terms to 5*A*s: Korthikanti's count exactly, plus 16 bytes per token of
LayerNorm statistics and the s*s causal mask, which the paper leaves out (tests assert this).

`device` selects PyTorch's per-device behaviour. "cpu" is measured (tests/model/
test_activation_memory.py, exact to the byte in fp32 and under autocast). "cuda" follows PyTorch's
documented CUDA behaviour and is an estimate here (no GPU to measure on):
- dropout: CUDA `native_dropout` keeps a bool mask (m = 1); CPU keeps the scaled noise tensor in
  the dtype of the dropped tensor (m = its element size).
- autocast: on CUDA softmax is an fp32 op (torch.amp "CUDA ops that can autocast to float32"), so
  eager attention keeps an fp32 softmax output plus the bf16 copy the value matmul makes of it; on
  CPU softmax stays in the compute dtype.
- fused attention with dropout: flash attention keeps only an RNG state; on CPU SDPA falls back to
  its math kernel, which saves like eager attention without the causal mask, in fp32 for bf16 inputs.
- LayerNorm statistics are fp32 on CUDA, in the input dtype on CPU.
- RMSNorm: CUDA has a fused kernel (`_fused_rms_norm`, PyTorch PR #153666) that saves input and
  rstd; on CPU `nn.RMSNorm` is the composite. `norm_impl` overrides the device default.
Not counted: transient buffers (gradients flowing through backward, allocator slack, workspaces):
these are the tensors alive at the end of the forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.serial import Serializable
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.ops import FINAL_NORM, NORM1, NORM2, attn_kernel
from depthwidth.shapes.shape import Shape

#: Bytes per element, by dtype name. Sources: IEEE 754-2008 (fp32 binary32, fp16 binary16);
#: Google Brain bfloat16 (8-bit exponent, 7-bit mantissa: 2 bytes); int8: 1 byte (quantized KV
#: caches; per-group scales are not counted); fp8: OCP 8-bit floating point spec (E4M3/E5M2).
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
#: Dtypes an activation, a residual stream or a parameter may be kept in.
FLOAT_DTYPES = ("fp32", "bf16", "fp16")
DEVICES = ("cuda", "cpu")
NORM_IMPLS = ("fused", "composite")
RECOMPUTE_KINDS = ("none", "selective", "full")
FP32 = 4  # norm statistics, softmax logsumexp, the fp32 loss
INT64 = 8  # token ids, position ids, targets


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise UserError(f"{name}={value!r} must be true or false")


def ceil_div(n: int, t: int) -> int:
    return -(-n // t)


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivationSetup:
    """How a forward pass runs, as far as saved activations depend on it.

    activation_dtype: dtype of matmul inputs/outputs and everything between them (c).
    residual_dtype: dtype of the residual stream, i.e. of norm inputs (r); default activation_dtype.
        Under torch.autocast it is fp32 and every matmul keeps a half-precision copy of its input.
    attn_impl: "fused" (flash / SDPA) | "eager" (explicit T x T softmax); "sdpa" means "fused".
    device: "cuda" | "cpu": PyTorch's per-device behaviour (module docstring).
    norm_impl: RMSNorm kernel, "fused" | "composite"; default: fused on cuda, composite on cpu.
    tp, sp: tensor parallelism over tp devices (Megatron-LM: heads and d_ff split), with sequence
        parallelism (norms, dropouts and the inputs of column-parallel matmuls split over tokens).
        Without sp those are replicated on every device. KV heads fewer than tp are replicated.
    """

    seq_len: int
    micro_batch: int = 1
    activation_dtype: str = "fp32"
    residual_dtype: str | None = None
    attn_impl: str = "fused"
    dropout: bool = False
    device: str = "cuda"
    norm_impl: str | None = None
    tp: int = 1
    sp: bool = False

    def __post_init__(self) -> None:
        check_int("seq_len", self.seq_len)
        check_int("micro_batch", self.micro_batch)
        check_choice("activation_dtype", self.activation_dtype, FLOAT_DTYPES)
        if self.residual_dtype is None:
            object.__setattr__(self, "residual_dtype", self.activation_dtype)
        check_choice("residual_dtype", self.residual_dtype, FLOAT_DTYPES)
        object.__setattr__(self, "attn_impl", attn_kernel(self.attn_impl))
        check_bool("dropout", self.dropout)
        check_choice("device", self.device, DEVICES)
        if self.norm_impl is None:
            object.__setattr__(self, "norm_impl", "fused" if self.device == "cuda" else "composite")
        check_choice("norm_impl", self.norm_impl, NORM_IMPLS)
        check_int("tp", self.tp)
        check_bool("sp", self.sp)

    def check_shape(self, shape: Shape) -> None:
        if self.seq_len > shape.max_seq_len:
            raise UserError(f"seq_len={self.seq_len} exceeds max_seq_len={shape.max_seq_len} of the shape")
        if shape.n_heads % self.tp:
            raise UserError(f"tp={self.tp} must divide n_heads={shape.n_heads} (tensor parallelism splits the heads)")

    @property
    def tokens(self) -> int:
        return self.seq_len * self.micro_batch

    @property
    def c(self) -> int:
        return DTYPE_BYTES[self.activation_dtype]

    @property
    def r(self) -> int:
        return DTYPE_BYTES[self.residual_dtype]

    @property
    def autocast(self) -> bool:
        """Matmuls cast their inputs (residual stream and compute dtype differ)."""
        return self.c != self.r

    def mask_bytes(self, element: int) -> int:
        """Bytes kept per dropped element of a tensor whose elements are `element` bytes."""
        return 1 if self.device == "cuda" else element


@dataclass(frozen=True, kw_only=True, slots=True)
class ActivationTerm(Serializable):
    """One tensor kept for backward: bytes for one micro-batch on one device."""

    name: str  # e.g. "attn.softmax_out"
    bytes: int
    saved_by: str  # the op that keeps it
    selective: bool = False  # dropped (and recomputed) by selective recomputation


def _norm(shape: Shape, setup: ActivationSetup, name: str, *, input_shared: bool) -> list[tuple[str, int, str]]:
    """(name, bytes, saved_by) of one norm, named `<op name>.<tensor>` after the norm's op in
    `depthwidth.shapes.ops`; `input_shared`: another norm saves the same input."""
    n, d, r = setup.tokens, shape.d_model, setup.r
    if shape.norm == "layernorm":  # native_layer_norm: input, mean, rstd
        stats = FP32 if setup.device == "cuda" else r
        terms = [] if input_shared else [(f"{name}.input", n * r * d, "layer_norm")]
        return terms + [(f"{name}.stats", n * 2 * stats, "layer_norm (mean, rstd)")]
    if setup.norm_impl == "fused":  # a fused RMSNorm kernel: input, rstd
        terms = [] if input_shared else [(f"{name}.input", n * r * d, "rms_norm (fused)")]
        return terms + [(f"{name}.rstd", n * FP32, "rms_norm (fused)")]
    # PyTorch's composite rms_norm computes in fp32: it saves the input upcast to fp32 (the input
    # itself when it is fp32), rsqrt(mean(x^2) + eps), and x * rstd for the weight multiply.
    shared = input_shared and r == FP32
    terms = [] if shared else [(f"{name}.input", n * FP32 * d, "rms_norm (input in fp32)")]
    return terms + [
        (f"{name}.rstd", n * FP32, "rms_norm (rsqrt)"),
        (f"{name}.normalized", n * FP32 * d, "rms_norm (x * rstd, for the weight)"),
    ]


def layer_activation_terms(shape: Shape, setup: ActivationSetup) -> tuple[ActivationTerm, ...]:
    """Every tensor one block keeps for backward, in forward order (module docstring)."""
    setup.check_shape(shape)
    n, c, d, s, tp = setup.tokens, setup.c, shape.d_model, setup.seq_len, setup.tp
    heads = shape.n_heads // tp
    q = heads * shape.head_dim
    k = ceil_div(shape.n_kv_heads, tp) * shape.head_dim
    f = ceil_div(shape.d_ff, tp)
    seq_split = tp if setup.sp else 1  # sequence-parallel region: split over tokens only with sp
    terms: list[ActivationTerm] = []

    def seq(items: list[tuple[str, int, str]]) -> None:
        terms.extend(ActivationTerm(name=nm, bytes=ceil_div(b, seq_split), saved_by=by) for nm, b, by in items)

    def par(name: str, nbytes: int, saved_by: str, selective: bool = False) -> None:  # already per tp rank
        terms.append(ActivationTerm(name=name, bytes=nbytes, saved_by=saved_by, selective=selective))

    seq(_norm(shape, setup, NORM1, input_shared=False))
    seq([("attn.qkv_input", n * c * d, "linear (qkv)")])
    cpu_math = setup.attn_impl == "fused" and setup.dropout and setup.device == "cpu"
    if setup.attn_impl == "eager" or cpu_math:
        # cpu_math: SDPA's math kernel (CPU, dropout > 0) computes bf16/fp16 attention in fp32
        e = FP32 if cpu_math else c  # bytes of the q, k, v copies and of the score tensors
        soft = FP32 if (setup.device == "cuda" and setup.autocast) else e  # CUDA autocast: fp32 softmax
        par("attn.q_k_v", n * 3 * e * q, "matmul (q, k and v copies, k/v repeated to all heads)")
        par("attn.softmax_out", n * soft * heads * s, "softmax", True)
        if shape.causal and not cpu_math:  # one (T, S) bool mask per layer, whatever batch and heads
            par("attn.causal_mask", s * s, "masked_fill (bool T x T mask)", True)
        if setup.dropout:
            par("attn.dropout_mask", n * setup.mask_bytes(soft) * heads * s, "dropout (attention weights)", True)
            par("attn.dropout_out", n * e * heads * s, "matmul (dropped weights @ v)", True)
        elif soft != e:
            par("attn.weights_cast", n * e * heads * s, "matmul (autocast copy of the weights)", True)
        par("attn.out_proj_input", n * c * q, "linear (out; transpose-reshape copy)")
    else:
        par("attn.qkv_out", n * c * (q + 2 * k), "scaled_dot_product_attention (q, k, v views)")
        if shape.pos == "rope":
            par("attn.rope_qk", n * c * (q + k), "scaled_dot_product_attention (rotated q, k)")
        par("attn.logsumexp", n * FP32 * heads, "scaled_dot_product_attention", True)
        par("attn.out", n * c * q, "scaled_dot_product_attention + linear (out)")
    if setup.dropout:
        seq([("attn.resid_dropout_mask", n * setup.mask_bytes(c) * d, "dropout")])
    seq(_norm(shape, setup, NORM2, input_shared=shape.parallel_residual))
    if shape.ffn == "swiglu" and setup.autocast:  # gate and up each make their own copy
        seq([("mlp.input", n * 2 * c * d, "linear (gate, up: two autocast copies)")])
    else:
        seq([("mlp.input", n * c * d, "linear (up" + (", gate)" if shape.ffn == "swiglu" else ")"))])
    if shape.ffn == "swiglu":
        par("mlp.hidden", n * 4 * c * f, "silu, mul, linear (gate out, silu out, up out, product)")
    elif shape.ffn == "relu":
        par("mlp.hidden", n * c * f, "relu + linear (down; one shared output)")
    else:
        par("mlp.hidden", n * 2 * c * f, "gelu (input) + linear (down; gelu output)")
    if setup.dropout:
        seq([("mlp.dropout_mask", n * setup.mask_bytes(c) * d, "dropout")])
    return tuple(terms)


def layer_input_bytes(shape: Shape, setup: ActivationSetup) -> int:
    """The block input, all that full recomputation keeps per layer (Korthikanti et al.: 2*s*b*h)."""
    return ceil_div(setup.tokens * shape.d_model * setup.r, setup.tp if setup.sp else 1)


def layer_bytes(shape: Shape, setup: ActivationSetup, *, recompute: str = "none") -> int:
    """Bytes one block keeps between its forward and its backward, on one device.

    recompute: "none" keeps every term; "selective" drops the attention core (softmax output,
    attention dropout mask and output, causal mask; logsumexp for fused attention), recomputed
    from the kept q, k, v; "full" keeps only the layer input (Korthikanti et al. 2022, sec. 5).
    """
    check_choice("recompute", recompute, RECOMPUTE_KINDS)
    terms = layer_activation_terms(shape, setup)
    if recompute == "full":
        return layer_input_bytes(shape, setup)
    return sum(t.bytes for t in terms if not (recompute == "selective" and t.selective))


def activation_bytes_per_layer(
    shape: Shape,
    *,
    seq_len: int,
    micro_batch: int = 1,
    activation_dtype: str = "fp32",
    residual_dtype: str | None = None,
    attn_impl: str = "fused",
    dropout: bool = False,
    device: str = "cuda",
    norm_impl: str | None = None,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
) -> int:
    """`layer_bytes` with the setup spelled out as keywords (see `ActivationSetup`)."""
    setup = ActivationSetup(
        seq_len=seq_len, micro_batch=micro_batch, activation_dtype=activation_dtype,
        residual_dtype=residual_dtype, attn_impl=attn_impl, dropout=dropout, device=device,
        norm_impl=norm_impl, tp=tp, sp=sp,
    )  # fmt: skip
    return layer_bytes(shape, setup, recompute=recompute)


def outside_activation_terms(shape: Shape, setup: ActivationSetup) -> tuple[ActivationTerm, ...]:
    """What the model keeps outside its blocks: token (and position) ids, the embedding dropout
    mask, the final norm, the LM-head input and the loss (log-softmax over the vocabulary in fp32,
    as `Transformer.forward` computes `cross_entropy(logits.float())`, int64 targets, the 0-d
    total weight). Vocabulary-sized terms are split over tp (vocab-parallel head and cross
    entropy), d-sized ones only with sp. The logits the caller holds are counted in memory()."""
    setup.check_shape(shape)
    n, c, r, d = setup.tokens, setup.c, setup.r, shape.d_model
    raw = [("embed.token_ids", n * INT64, "embedding")]
    if shape.pos == "learned":
        raw.append(("embed.position_ids", setup.seq_len * INT64, "embedding (positions)"))
    if setup.dropout:
        raw.append(("embed.dropout_mask", n * setup.mask_bytes(r) * d, "dropout"))
    if shape.final_norm:
        raw += _norm(shape, setup, FINAL_NORM, input_shared=False)
    if shape.lm_head:
        raw.append(("head.input", n * c * d, "linear (head)"))
    split = setup.tp if setup.sp else 1
    terms = [ActivationTerm(name=nm, bytes=ceil_div(b, split), saved_by=by) for nm, b, by in raw]
    if shape.lm_head:
        vocab = ceil_div(shape.vocab_size, setup.tp)
        terms.append(ActivationTerm(name="loss.log_softmax", bytes=n * FP32 * vocab, saved_by="cross_entropy"))
        terms.append(ActivationTerm(name="loss.targets", bytes=n * INT64, saved_by="nll_loss"))
        terms.append(ActivationTerm(name="loss.total_weight", bytes=FP32, saved_by="nll_loss (0-d fp32)"))
    return tuple(terms)


__all__ = [
    "DTYPE_BYTES",
    "ActivationSetup",
    "ActivationTerm",
    "activation_bytes_per_layer",
    "layer_activation_terms",
    "layer_bytes",
    "layer_input_bytes",
    "outside_activation_terms",
]
