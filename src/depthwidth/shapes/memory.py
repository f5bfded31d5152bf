"""Training and inference memory of a `Shape`: model states, activations, KV cache, per device.

Model states (Rajbhandari et al. 2020, "ZeRO", sec. 3.1): mixed-precision training with Adam keeps
2 bytes of half-precision parameters, 2 bytes of half-precision gradients and K = 12 bytes of
optimizer state per parameter (fp32 master weights, Adam m and v): 16 bytes. Plain fp32 training
with AdamW keeps 4 + 4 + 8 = 16 bytes; SGD with momentum 4 + 4 + 4; plain SGD 4 + 4.
(torch.autocast keeps fp32 parameters and gradients instead: 4 + 4 + 8 bytes, the same 16, plus a
bf16 copy of each weight cached for the forward and saved for backward, which is not counted.)
`param_dtype` is the dtype of the master weights and of the optimizer states: with
`train_precision="bf16-mixed", param_dtype="bf16"` there is no master copy (pure bf16: 2 + 2 + 4).

Two conventions for mixed precision (`convention`), each only a set of defaults for `residual_dtype`
and `grad_dtype`:
- "amp" (PyTorch AMP, torch.autocast; the default): the residual stream, embeddings and norms stay
  fp32 and each matmul keeps a half-precision copy of its input; model states as ZeRO counts them
  (2 + 2 + 12 bytes per parameter with AdamW).
- "megatron" (Megatron-LM `--fp16`/`--bf16` with fp32 main gradients, `--accumulate-allreduce-grads-in-fp32`):
  the whole module runs in half precision, residual stream included (Korthikanti et al. 2022 count
  it in 2 bytes); half-precision weights (2), fp32 main gradients (4), fp32 master weights and Adam
  moments (12): 18 bytes per parameter (Megatron Core, "Distributed Optimizer": float16 param,
  fp32 grads, 18 bytes).

ZeRO stage 1 shards the optimizer states over the dp data-parallel ranks, stage 2 also the
gradients, stage 3 also the parameters (ZeRO sec. 5 and Figure 1: P_os, P_os+g, P_os+g+p).

Tensor parallelism over tp devices (Megatron-LM, Shoeybi et al. 2019): the q/k/v, output, MLP
matrices and their column-parallel biases, the token embedding and the LM head (vocab-parallel) are
split over tp; norms, learned position embeddings and the biases of the two row-parallel matmuls
(attention output, MLP down, d each) are replicated. Shards are rounded up.

Pipeline parallelism over pp stages (`depthwidth.shapes.pipeline`): each stage holds its blocks (the
first also the embedding, the last the final norm and LM head), keeps the activations of the
micro-batches its schedule has in flight (1F1B: pp on the first stage; interleaved over
virtual_stages chunks: 1 + (pp-1)/(pp*V) times more); the per-device fields describe the stage with
the most memory, `pipeline` every stage, the bubble and the point-to-point bytes.

Activations: see `depthwidth.shapes.activations` (term by term, checked against the tensors PyTorch
saves). Full recomputation keeps each block's input and, while one block runs its backward, that
block's recomputed activations; selective recomputation keeps everything but the attention core,
which is recomputed for one block at a time. Those working sets (`recompute_bytes`) are counted.

KV cache (inference): 2 * n_layers * n_kv_heads * head_dim * bytes per token per sequence, the same
tensors `depthwidth.model.KVCache` holds; int8/fp8 caches are counted without their scales.

Not counted: gradient buffers flowing through the backward pass, communication buckets, allocator
fragmentation, the CUDA context and kernels' workspaces. `total_training_bytes` is what is alive at
the end of the forward pass: model states, saved activations and the logits the caller holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.activations import (
    DTYPE_BYTES,
    FLOAT_DTYPES,
    RECOMPUTE_KINDS,
    ActivationSetup,
    ActivationTerm,
    activation_bytes_per_layer,
    ceil_div,
    layer_activation_terms,
    layer_bytes,
    layer_input_bytes,
    outside_activation_terms,
)
from depthwidth.shapes.checks import check_choice, check_int
from depthwidth.shapes.params import count_params
from depthwidth.shapes.pipeline import PipelineBreakdown, PipelineSetup, pipeline_memory
from depthwidth.shapes.shape import Shape

TRAIN_PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed")
#: Optimizer states per parameter, in units of the master-weight dtype. Adam/AdamW: m and v
#: (Kingma & Ba 2015); SGD with momentum: one momentum buffer; plain SGD: none.
OPTIMIZER_STATES: dict[str, int] = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
ZERO_STAGES = (0, 1, 2, 3)
KV_DTYPES = tuple(DTYPE_BYTES)
_COMPUTE_DTYPE = {"fp32": "fp32", "bf16-mixed": "bf16", "fp16-mixed": "fp16"}
#: Mixed-precision accounting conventions (module docstring): "amp" = PyTorch AMP, "megatron" = Megatron-LM.
CONVENTIONS = ("amp", "megatron")


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryBreakdown:
    """Memory of one training (and inference) setup, in bytes, per device unless stated."""

    params_per_device: int  # parameters a device holds after tensor parallelism, before ZeRO
    params_bytes: int  # after ZeRO-3 sharding when zero_stage == 3
    grads_bytes: int  # after ZeRO-2/3 sharding
    optimizer_bytes: int  # master weights (mixed precision) + optimizer states, after ZeRO-1/2/3
    activation_bytes_per_layer: int  # one block, with the recomputation policy applied
    recompute_bytes: int  # one block's recomputed activations during its backward (0 with "none")
    outside_activation_bytes: int  # embedding, final norm, LM-head input, loss
    activation_bytes: int  # n_layers * per layer + recompute_bytes + outside
    logits_bytes: int  # the (B, T, V) logits the training loop holds until backward
    kv_cache_bytes_per_token: int  # one sequence, all layers, whole model
    kv_cache_bytes: int  # kv_batch sequences of kv_context tokens, whole model
    layer_terms: tuple[ActivationTerm, ...]  # one block, before recomputation
    outside_terms: tuple[ActivationTerm, ...]
    pipeline: PipelineBreakdown  # every stage (one stage when pp == 1); the fields above are the peak stage's

    @property
    def model_states_bytes(self) -> int:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def kept_activation_bytes(self) -> int:
        """Activations saved between forward and backward (Korthikanti et al.'s count): without the
        working set of the one block being recomputed."""
        return self.activation_bytes - self.recompute_bytes

    @property
    def total_training_bytes(self) -> int:
        """Per device at the end of the forward pass: model states + activations + logits."""
        return self.model_states_bytes + self.activation_bytes + self.logits_bytes

    def to_dict(self) -> dict[str, object]:
        return {
            "params_per_device": self.params_per_device,
            "params_bytes": self.params_bytes,
            "grads_bytes": self.grads_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "model_states_bytes": self.model_states_bytes,
            "activation_bytes_per_layer": self.activation_bytes_per_layer,
            "recompute_bytes": self.recompute_bytes,
            "outside_activation_bytes": self.outside_activation_bytes,
            "activation_bytes": self.activation_bytes,
            "kept_activation_bytes": self.kept_activation_bytes,
            "block_activation_bytes": self.pipeline.peak.layer_activation_bytes,
            "logits_bytes": self.logits_bytes,
            "total_training_bytes": self.total_training_bytes,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache_bytes": self.kv_cache_bytes,
            "layer_terms": {t.name: t.bytes for t in self.layer_terms},
            "outside_terms": {t.name: t.bytes for t in self.outside_terms},
            "pipeline": self.pipeline.to_dict(),
        }


def kv_cache_bytes_per_token(shape: Shape, *, dtype: str = "bf16") -> int:
    """Keys and values of every layer for one token of one sequence:
    2 * n_layers * n_kv_heads * head_dim * bytes_per_element (GQA-aware: n_kv_heads, not n_heads)."""
    check_choice("kv_dtype", dtype, KV_DTYPES)
    return 2 * shape.n_layers * shape.n_kv_heads * shape.head_dim * DTYPE_BYTES[dtype]


def params_per_device(shape: Shape, *, tp: int = 1) -> int:
    """Parameters one tensor-parallel rank holds (module docstring: what is split, what replicated)."""
    check_int("tp", tp)
    counts = count_params(shape)
    row_parallel_biases = 2 * shape.d_model * shape.n_layers if shape.linear_bias else 0
    replicated = counts.norms + counts.position + row_parallel_biases
    return ceil_div(counts.total - replicated, tp) + replicated


def state_bytes_per_param(*, train_precision: str, param_dtype: str, optimizer: str,
                          grad_dtype: str | None = None) -> tuple[int, int, int]:
    """(parameter, gradient, optimizer) bytes per parameter before any sharding (ZeRO sec. 3.1).
    grad_dtype: the gradients' dtype, default the compute dtype ("fp32": Megatron-LM's main gradients)."""
    check_choice("train_precision", train_precision, TRAIN_PRECISIONS)
    check_choice("optimizer", optimizer, tuple(OPTIMIZER_STATES))
    if grad_dtype is not None:
        check_choice("grad_dtype", grad_dtype, FLOAT_DTYPES)
    compute = _COMPUTE_DTYPE[train_precision]
    allowed = ("fp32",) if compute == "fp32" else ("fp32", compute)
    if param_dtype not in allowed:
        raise UserError(
            f"param_dtype={param_dtype!r} is not allowed with train_precision={train_precision!r}; "
            f"expected one of {', '.join(allowed)}"
        )
    working = DTYPE_BYTES[compute]  # the copy the forward uses, and its gradients
    master = DTYPE_BYTES[param_dtype]
    master_copy = master if param_dtype != compute else 0  # mixed precision keeps a separate master copy
    grads = working if grad_dtype is None else DTYPE_BYTES[grad_dtype]
    return working, grads, master_copy + OPTIMIZER_STATES[optimizer] * master


def memory(
    shape: Shape,
    *,
    seq_len: int,
    micro_batch: int = 1,
    param_dtype: str = "fp32",
    train_precision: str = "fp32",
    optimizer: str = "adamw",
    zero_stage: int = 0,
    dp: int = 1,
    tp: int = 1,
    sp: bool = False,
    pp: int = 1,
    virtual_stages: int = 1,
    microbatches: int | None = None,
    recompute: str = "none",
    attn_impl: str = "fused",
    convention: str = "amp",
    activation_dtype: str | None = None,
    residual_dtype: str | None = None,
    grad_dtype: str | None = None,
    dropout: bool = False,
    device: str = "cuda",
    norm_impl: str | None = None,
    kv_dtype: str = "bf16",
    kv_batch: int = 1,
    kv_context: int | None = None,
) -> MemoryBreakdown:
    """Memory of training `shape` on one device of a dp x tp x pp group, and of its KV cache.

    train_precision: "fp32" | "bf16-mixed" | "fp16-mixed" (half-precision compute, master weights
        in param_dtype). activation_dtype defaults to the compute dtype (fp32, bf16 or fp16).
    convention: "amp" | "megatron" (module docstring): the defaults of residual_dtype and grad_dtype.
    residual_dtype: dtype of the residual stream and norm inputs; default under "amp" fp32 with a
        mixed precision (torch.autocast leaves embeddings, residual adds and norms in fp32, as our
        Transformer runs), else activation_dtype; under "megatron" activation_dtype.
    grad_dtype: gradients' dtype; default the compute dtype ("amp"), fp32 ("megatron").
    pp, virtual_stages, microbatches: pipeline stages, model chunks per stage (> 1: interleaved 1F1B)
        and micro-batches per step (default pp); see `depthwidth.shapes.pipeline`.
    attn_impl: "fused" (flash / SDPA, the default of our Transformer; "sdpa" is accepted) | "eager"
        (explicit T x T softmax).
    dropout: dropout > 0 in training (masks kept for backward).
    device: "cuda" | "cpu": PyTorch's per-device behaviour (dropout masks, autocast softmax, RMSNorm
        kernel; `depthwidth.shapes.activations`). norm_impl overrides the RMSNorm kernel.
    recompute: "none" | "selective" | "full" (see the module docstring).
    kv_dtype, kv_batch, kv_context: the inference KV cache; kv_context defaults to seq_len.
    """
    check_choice("convention", convention, CONVENTIONS)
    if convention == "megatron" and residual_dtype is None:
        residual_dtype = activation_dtype or _COMPUTE_DTYPE.get(train_precision)
    if convention == "megatron" and grad_dtype is None:
        grad_dtype = "fp32"
    setup = _activation_setup(
        train_precision=train_precision, seq_len=seq_len, micro_batch=micro_batch, activation_dtype=activation_dtype,
        residual_dtype=residual_dtype, attn_impl=attn_impl, dropout=dropout, device=device, norm_impl=norm_impl,
        tp=tp, sp=sp,
    )  # fmt: skip
    setup.check_shape(shape)
    pipe = PipelineSetup(pp=pp, virtual_stages=virtual_stages, microbatches=microbatches)
    pipe.check_shape(shape)
    check_choice("recompute", recompute, RECOMPUTE_KINDS)
    check_choice("param_dtype", param_dtype, FLOAT_DTYPES)
    check_choice("zero_stage", zero_stage, ZERO_STAGES)
    check_int("dp", dp)
    check_choice("kv_dtype", kv_dtype, KV_DTYPES)
    check_int("kv_batch", kv_batch)
    kv_context = seq_len if kv_context is None else kv_context
    check_int("kv_context", kv_context)
    if kv_context > shape.max_seq_len:
        raise UserError(f"kv_context={kv_context} exceeds max_seq_len={shape.max_seq_len} of the shape")
    per_param = state_bytes_per_param(train_precision=train_precision, param_dtype=param_dtype, optimizer=optimizer,
                                      grad_dtype=grad_dtype)
    layer_terms = layer_activation_terms(shape, setup)
    per_layer, recompute_bytes = _layer_activations(shape, setup, layer_terms=layer_terms, recompute=recompute)
    outside_terms = outside_activation_terms(shape, setup)
    embed = sum(t.bytes for t in outside_terms if t.name.startswith("embed."))
    head = sum(t.bytes for t in outside_terms) - embed
    logits_bytes = setup.tokens * ceil_div(shape.vocab_size, tp) * setup.c if shape.lm_head else 0
    pipeline = pipeline_memory(
        shape, pipe, tp=tp, sp=sp, tokens=setup.tokens, layer_bytes=per_layer, recompute_bytes=recompute_bytes,
        embed_bytes=embed, head_bytes=head, logits_bytes=logits_bytes, residual_bytes=setup.r,
        states=lambda n: _sharded_states(n, per_param, zero_stage=zero_stage, dp=dp))
    peak = pipeline.peak
    per_token = kv_cache_bytes_per_token(shape, dtype=kv_dtype)
    return MemoryBreakdown(
        params_per_device=peak.params,
        params_bytes=peak.params_bytes,
        grads_bytes=peak.grads_bytes,
        optimizer_bytes=peak.optimizer_bytes,
        activation_bytes_per_layer=per_layer,
        recompute_bytes=peak.recompute_bytes,
        outside_activation_bytes=peak.outside_activation_bytes,
        activation_bytes=peak.activation_bytes,
        logits_bytes=peak.logits_bytes,
        kv_cache_bytes_per_token=per_token,
        kv_cache_bytes=per_token * kv_batch * kv_context,
        layer_terms=layer_terms,
        outside_terms=outside_terms,
        pipeline=pipeline,
    )


def _activation_setup(*, train_precision: str, activation_dtype: str | None, residual_dtype: str | None,
                      **setup: object) -> ActivationSetup:
    """The forward pass of `train_precision`: activations in its compute dtype unless given; the residual
    stream in fp32 under a mixed precision (torch.autocast), else in the activation dtype."""
    check_choice("train_precision", train_precision, TRAIN_PRECISIONS)
    compute = _COMPUTE_DTYPE[train_precision]
    activation_dtype = compute if activation_dtype is None else activation_dtype
    if residual_dtype is None and activation_dtype in FLOAT_DTYPES:
        residual_dtype = "fp32" if train_precision != "fp32" else activation_dtype
    return ActivationSetup(activation_dtype=activation_dtype, residual_dtype=residual_dtype, **setup)


def _sharded_states(n_params: int, per_param: tuple[int, int, int], *, zero_stage: int,
                    dp: int) -> tuple[int, int, int]:
    """(parameter, gradient, optimizer) bytes of `n_params` parameters on one device: ZeRO stage 1 shards
    the optimizer states over dp, stage 2 also the gradients, stage 3 also the parameters."""
    p_b, g_b, o_b = per_param
    return (ceil_div(n_params * p_b, dp if zero_stage >= 3 else 1),
            ceil_div(n_params * g_b, dp if zero_stage >= 2 else 1),
            ceil_div(n_params * o_b, dp if zero_stage >= 1 else 1))


def _layer_activations(shape: Shape, setup: ActivationSetup, *, layer_terms: tuple[ActivationTerm, ...],
                       recompute: str) -> tuple[int, int]:
    """(bytes one block keeps with the recomputation policy, the working set of one block recomputed
    during its backward): full recompute recomputes the block less its kept input, selective the
    attention core, none nothing."""
    full_layer = sum(t.bytes for t in layer_terms)
    per_layer = layer_bytes(shape, setup, recompute=recompute)
    if recompute == "full":
        return per_layer, full_layer - layer_input_bytes(shape, setup)
    return per_layer, full_layer - per_layer


__all__ = [
    "CONVENTIONS",
    "DTYPE_BYTES",
    "MemoryBreakdown",
    "activation_bytes_per_layer",
    "kv_cache_bytes_per_token",
    "memory",
    "params_per_device",
    "state_bytes_per_param",
]
