"""Analytic memory: Korthikanti et al. 2022 activation counts, ZeRO model states, KV cache bytes,
validation. Expected values are derived by hand here from the published formulas."""

from __future__ import annotations

import pytest

from depthwidth.shapes.activations import ActivationSetup, layer_activation_terms
from depthwidth.shapes.memory import (
    DTYPE_BYTES,
    MemoryBreakdown,
    activation_bytes_per_layer,
    kv_cache_bytes_per_token,
    memory,
    params_per_device,
)
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape

# GPT-2 small (Radford et al. 2019) and GPT-3 175B (Brown et al. 2020): s, b, h, a
GPT2 = Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50257, bias="all")
GPT3 = Shape(n_layers=96, d_model=12288, n_heads=96, vocab_size=50257, max_seq_len=2048, bias="all")
# Megatron-LM style fp16 module: activations and the residual stream in fp16, bool dropout masks
FP16 = dict(train_precision="fp16-mixed", residual_dtype="fp16", attn_impl="eager", dropout=True)


def _korthikanti_cases():
    return [(GPT2, 1024, 4), (GPT3, 2048, 1)]


@pytest.mark.parametrize("shape,s,b", _korthikanti_cases())
def test_gpt_block_in_fp16_is_korthikanti_34_plus_5as_over_h(shape: Shape, s: int, b: int) -> None:
    """Korthikanti et al. 2022, eq. 1: s*b*h*(34 + 5*a*s/h) bytes per layer. Our block saves exactly
    that, plus two LayerNorms' fp32 mean and rstd (16 bytes per token) and the bool T x T causal
    mask of the eager path (s*s bytes), which the paper does not count."""
    h, a = shape.d_model, shape.n_heads
    per_layer = memory(shape, seq_len=s, micro_batch=b, **FP16).activation_bytes_per_layer
    assert per_layer == 34 * s * b * h + 5 * a * s * s * b + 16 * s * b + s * s
    # the extras are small: 0.3% for GPT-2 small at s = 1024, 0.15% for GPT-3 at s = 2048
    assert 0 < per_layer / (s * b * h * (34 + 5 * a * s / h)) - 1 < 5e-3


@pytest.mark.parametrize("t", [2, 4])
def test_tensor_and_sequence_parallel_match_korthikanti(t: int) -> None:
    """Eq. 2 (tensor parallel): s*b*h*(10 + 24/t + 5*a*s/(h*t)); eq. 3 (with sequence parallel):
    s*b*h*(34 + 5*a*s/h)/t; the norm statistics follow their region, the causal mask is per device."""
    s, b, h, a = 1024, 4, 768, 12
    tp_only = memory(GPT2, seq_len=s, micro_batch=b, tp=t, **FP16).activation_bytes_per_layer
    assert tp_only == 10 * s * b * h + 24 * s * b * h // t + 5 * a * s * s * b // t + 16 * s * b + s * s
    with_sp = memory(GPT2, seq_len=s, micro_batch=b, tp=t, sp=True, **FP16).activation_bytes_per_layer
    assert with_sp == (34 * s * b * h + 5 * a * s * s * b + 16 * s * b) // t + s * s


def test_recomputation_matches_korthikanti() -> None:
    """Selective recomputation drops the 5*a*s/h term (Table 2: 34*s*b*h); full keeps 2*s*b*h."""
    s, b, h = 1024, 4, 768
    sel = memory(GPT2, seq_len=s, micro_batch=b, recompute="selective", **FP16)
    assert sel.activation_bytes_per_layer == 34 * s * b * h + 16 * s * b
    assert sel.recompute_bytes == 5 * 12 * s * s * b + s * s  # one layer's attention core at a time
    full = memory(GPT2, seq_len=s, micro_batch=b, recompute="full", **FP16)
    assert full.activation_bytes_per_layer == 2 * s * b * h
    none = memory(GPT2, seq_len=s, micro_batch=b, **FP16)
    assert none.recompute_bytes == 0
    # full: every layer's input, plus one layer recomputed during its backward
    assert full.activation_bytes == 12 * 2 * s * b * h + (none.activation_bytes_per_layer - 2 * s * b * h) + (
        none.outside_activation_bytes
    )
    sp = memory(GPT2, seq_len=s, micro_batch=b, recompute="full", tp=4, sp=True, **FP16)
    assert sp.activation_bytes_per_layer == 2 * s * b * h // 4


def test_fused_attention_keeps_no_score_matrix() -> None:
    """Flash/SDPA: the 5*a*s/h term becomes the fp32 logsumexp, 4*a bytes per token; the d-terms
    stay 34*h (q, k, v as one qkv tensor, the output shared with the out-projection input)."""
    s, b, h, a = 1024, 4, 768, 12
    fused = memory(GPT2, seq_len=s, micro_batch=b, **{**FP16, "attn_impl": "fused"})
    assert fused.activation_bytes_per_layer == 34 * s * b * h + 4 * a * s * b + 16 * s * b
    # "sdpa" is the model's name for the same thing
    assert memory(GPT2, seq_len=s, micro_batch=b, **{**FP16, "attn_impl": "sdpa"}) == fused


def test_gqa_shrinks_fused_qkv_but_not_eager_qkv() -> None:
    """Fused attention keeps k, v at n_kv_heads width; eager repeats them to n_heads first."""
    mha = Shape(n_layers=2, d_model=1024, n_heads=16, vocab_size=100, pos="rope")
    gqa = mha.with_(n_kv_heads=4)
    n, c = 512 * 2, 4  # tokens, fp32 bytes
    q, k = 1024, 4 * 64

    def term(shape, impl, name):
        terms = layer_activation_terms(shape, ActivationSetup(seq_len=512, micro_batch=2, attn_impl=impl))
        return {t.name: t.bytes for t in terms}[name]

    assert term(mha, "fused", "attn.qkv_out") - term(gqa, "fused", "attn.qkv_out") == n * c * 2 * (q - k)
    assert term(mha, "fused", "attn.rope_qk") - term(gqa, "fused", "attn.rope_qk") == n * c * (q - k)
    assert term(mha, "eager", "attn.q_k_v") == term(gqa, "eager", "attn.q_k_v") == n * c * 3 * q


def test_swiglu_and_autocast_terms() -> None:
    """SwiGLU keeps gate out, silu out, up out and their product (4*f); under autocast the gate
    and up matmuls each keep their own bf16 copy of the input, in fp32 they share it."""
    shape = Shape(n_layers=1, d_model=256, n_heads=4, ffn="swiglu", vocab_size=100)
    f = shape.d_ff
    assert f == 704  # 8/3*256 rounded up to a multiple of 64
    fp32 = {t.name: t.bytes for t in layer_activation_terms(shape, ActivationSetup(seq_len=10))}
    setup = ActivationSetup(seq_len=10, activation_dtype="bf16", residual_dtype="fp32")
    amp = {t.name: t.bytes for t in layer_activation_terms(shape, setup)}
    assert fp32["mlp.hidden"] == 10 * 4 * 4 * f
    assert amp["mlp.hidden"] == 10 * 4 * 2 * f
    assert fp32["mlp.input"] == 10 * 4 * 256
    assert amp["mlp.input"] == 10 * 2 * 2 * 256
    assert amp["norm2.input"] == 10 * 4 * 256  # the residual stream stays fp32 under autocast


def test_memory_defaults_follow_train_precision() -> None:
    shape = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=100)
    amp = memory(shape, seq_len=16, train_precision="bf16-mixed")
    explicit = memory(shape, seq_len=16, train_precision="bf16-mixed", activation_dtype="bf16", residual_dtype="fp32")
    assert amp == explicit
    assert amp.activation_bytes_per_layer == activation_bytes_per_layer(
        shape, seq_len=16, activation_dtype="bf16", residual_dtype="fp32"
    )
    assert memory(shape, seq_len=16).activation_bytes_per_layer == activation_bytes_per_layer(shape, seq_len=16)
    assert memory(shape, seq_len=16).kv_cache_bytes == 16 * kv_cache_bytes_per_token(shape, dtype="bf16")


# ---- model states ------------------------------------------------------------------------------
# A 1.07B-parameter GPT: L=20, d=2048, 16 heads, GELU 4d, no biases, RoPE, tied 32000 vocabulary.
BIG = Shape(n_layers=20, d_model=2048, n_heads=16, vocab_size=32000, pos="rope")
P = 12 * 20 * 2048**2 + (2 * 20 + 1) * 2048 + 32000 * 2048  # blocks + 41 norms + embedding


def test_one_billion_parameter_model_states() -> None:
    assert count_params(BIG).total == P == 1_072_252_928
    # ZeRO paper sec. 3.1: mixed precision Adam = 2 + 2 + 12 = 16 bytes per parameter
    amp = memory(BIG, seq_len=128, train_precision="bf16-mixed", optimizer="adamw")
    assert (amp.params_bytes, amp.grads_bytes, amp.optimizer_bytes) == (2 * P, 2 * P, 12 * P)
    assert amp.model_states_bytes == 16 * P == 17_156_046_848
    # ZeRO-1/2/3 over 8 ranks: 2 + 2 + 12/8 = 5.5, 2 + 14/8 = 3.75, 16/8 = 2 bytes per parameter
    z = {st: memory(BIG, seq_len=128, train_precision="bf16-mixed", zero_stage=st, dp=8) for st in (1, 2, 3)}
    assert z[1].model_states_bytes * 2 == 11 * P
    assert z[2].model_states_bytes * 4 == 15 * P
    assert z[3].model_states_bytes == 2 * P
    assert z[3].params_bytes * 4 == P
    # fp32: AdamW 4 + 4 + 8, SGD with momentum 4 + 4 + 4, plain SGD 4 + 4
    assert memory(BIG, seq_len=128).model_states_bytes == 16 * P
    assert memory(BIG, seq_len=128, optimizer="sgd-momentum").model_states_bytes == 12 * P
    assert memory(BIG, seq_len=128, optimizer="sgd").model_states_bytes == 8 * P
    # pure bf16 (no fp32 master copy): 2 + 2 + 2*2
    pure = memory(BIG, seq_len=128, train_precision="bf16-mixed", param_dtype="bf16")
    assert pure.model_states_bytes == 8 * P
    # ZeRO without data parallelism shards nothing
    assert memory(BIG, seq_len=128, zero_stage=3, dp=1).model_states_bytes == 16 * P


def test_tensor_parallel_splits_matrices_and_vocab_not_norms() -> None:
    norms = 41 * 2048
    assert params_per_device(BIG, tp=1) == P
    assert params_per_device(BIG, tp=2) == (P - norms) // 2 + norms
    m = memory(BIG, seq_len=128, tp=4, dp=2, zero_stage=3, train_precision="bf16-mixed")
    assert m.model_states_bytes == 16 * ((P - norms) // 4 + norms) // 2
    # GPT-2 with biases: the out-projection and MLP-down biases (d each per layer) and the learned
    # position table are replicated as well
    replicated = 25 * 2 * 768 + 1024 * 768 + 12 * 2 * 768
    assert params_per_device(GPT2, tp=2) == (124_439_808 - replicated + 1) // 2 + replicated


def test_breakdown_totals_and_dict() -> None:
    m = memory(GPT2, seq_len=256, micro_batch=2, train_precision="bf16-mixed", dropout=True)
    assert isinstance(m, MemoryBreakdown)
    assert m.activation_bytes == 12 * m.activation_bytes_per_layer + m.outside_activation_bytes
    assert m.total_training_bytes == m.model_states_bytes + m.activation_bytes + m.logits_bytes
    assert m.logits_bytes == 256 * 2 * 50257 * 2  # bf16 logits held by the training loop
    d = m.to_dict()
    keys = ("params_bytes", "grads_bytes", "optimizer_bytes", "model_states_bytes", "activation_bytes",
            "activation_bytes_per_layer", "total_training_bytes", "kv_cache_bytes_per_token", "kv_cache_bytes")
    for key in keys:
        assert d[key] == getattr(m, key)
    assert sum(d["layer_terms"].values()) == m.activation_bytes_per_layer
    with pytest.raises(AttributeError):
        m.params_bytes = 0  # frozen


# ---- KV cache ----------------------------------------------------------------------------------
def test_kv_cache_reference_numbers() -> None:
    """2 * L * n_kv_heads * head_dim * bytes: Llama-2-7B (32 layers, 32 KV heads of 128) holds
    0.5 MiB per token in bf16; Llama-3-8B (8 KV heads, GQA) 128 KiB."""
    llama2 = Shape(n_layers=32, d_model=4096, n_heads=32, vocab_size=32000, ffn="swiglu", pos="rope")
    llama3 = llama2.with_(n_kv_heads=8, vocab_size=128256)
    assert kv_cache_bytes_per_token(llama2, dtype="bf16") == 2 * 32 * 32 * 128 * 2 == 512 * 1024
    assert kv_cache_bytes_per_token(llama3, dtype="bf16") == 128 * 1024
    assert kv_cache_bytes_per_token(llama3, dtype="int8") == 64 * 1024
    assert kv_cache_bytes_per_token(llama3, dtype="fp32") == 256 * 1024
    m = memory(llama3, seq_len=128, kv_dtype="fp16", kv_batch=8, kv_context=1024)
    assert m.kv_cache_bytes == 128 * 1024 * 8 * 1024
    assert m.kv_cache_bytes_per_token == 128 * 1024
    assert DTYPE_BYTES["bf16"] == DTYPE_BYTES["fp16"] == 2


# ---- validation --------------------------------------------------------------------------------
SMALL = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=100, max_seq_len=64)


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("param_dtype", dict(param_dtype="fp64")),
        ("param_dtype", dict(param_dtype="bf16")),  # bf16 master weights need a mixed precision
        ("train_precision", dict(train_precision="fp8")),
        ("optimizer", dict(optimizer="adam8bit")),
        ("activation_dtype", dict(activation_dtype="int8")),
        ("residual_dtype", dict(residual_dtype="float32")),
        ("recompute", dict(recompute="partial")),
        ("attn_impl", dict(attn_impl="flash3")),
        ("zero_stage", dict(zero_stage=4)),
        ("zero_stage", dict(zero_stage=True)),
        ("dp", dict(dp=0)),
        ("dp", dict(dp=-2)),
        ("tp", dict(tp=3)),  # does not divide 4 heads
        ("tp", dict(tp=0)),
        ("sp", dict(sp="yes")),
        ("dropout", dict(dropout=0.1)),
        ("device", dict(device="tpu")),
        ("norm_impl", dict(norm_impl="apex")),
        ("kv_dtype", dict(kv_dtype="int4")),
        ("kv_batch", dict(kv_batch=0)),
        ("kv_context", dict(kv_context=65)),
        ("micro_batch", dict(micro_batch=1.5)),
    ],
)
def test_bad_input_names_the_field(field: str, kwargs: dict) -> None:
    with pytest.raises(ValueError, match=rf"^{field}="):
        memory(SMALL, seq_len=16, **kwargs)


@pytest.mark.parametrize("seq_len", [0, 65, "16"])
def test_bad_seq_len(seq_len) -> None:
    with pytest.raises(ValueError, match=r"^seq_len="):
        memory(SMALL, seq_len=seq_len)
    with pytest.raises(ValueError, match=r"^seq_len="):
        activation_bytes_per_layer(SMALL, seq_len=seq_len)


def test_bad_input_to_helpers() -> None:
    with pytest.raises(ValueError, match=r"^kv_dtype="):
        kv_cache_bytes_per_token(SMALL, dtype="float16")
    with pytest.raises(ValueError, match=r"^recompute="):
        activation_bytes_per_layer(SMALL, seq_len=8, recompute="some")
    with pytest.raises(ValueError, match=r"^tp="):
        params_per_device(SMALL, tp=0)


# ---- device behaviour --------------------------------------------------------------------------
def test_cuda_autocast_keeps_an_fp32_softmax_and_bool_masks() -> None:
    """torch.amp lists softmax among the CUDA ops that autocast to fp32: eager attention keeps the
    fp32 softmax output and the bf16 copy the value matmul makes of it (2 + 4 bytes per score,
    against 2 on CPU). CUDA dropout keeps 1-byte bool masks, CPU dropout the noise tensor."""
    shape = Shape(n_layers=1, d_model=64, n_heads=4, vocab_size=100, max_seq_len=128)
    s, a = 128, 4
    amp = dict(seq_len=s, activation_dtype="bf16", residual_dtype="fp32", attn_impl="eager")

    def terms(**kw):
        return {t.name: t.bytes for t in layer_activation_terms(shape, ActivationSetup(**{**amp, **kw}))}

    cuda, cpu = terms(device="cuda"), terms(device="cpu")
    assert cuda["attn.softmax_out"] == s * a * s * 4
    assert cuda["attn.weights_cast"] == s * a * s * 2
    assert cpu["attn.softmax_out"] == s * a * s * 2
    assert "attn.weights_cast" not in cpu
    cuda, cpu = terms(device="cuda", dropout=True), terms(device="cpu", dropout=True)
    assert (cuda["attn.dropout_mask"], cuda["attn.dropout_out"]) == (s * a * s * 1, s * a * s * 2)
    assert (cpu["attn.dropout_mask"], cpu["attn.dropout_out"]) == (s * a * s * 2, s * a * s * 2)
    assert "attn.weights_cast" not in cuda  # the dropout output is what gets cast
    assert cuda["mlp.dropout_mask"] == s * 64 * 1
    assert cpu["mlp.dropout_mask"] == s * 64 * 2
    # fused attention with dropout: flash keeps an RNG state only; CPU runs SDPA's math kernel,
    # which keeps q, k, v and three score tensors in fp32 (no bool causal mask)
    fused = dict(attn_impl="fused", dropout=True)
    cuda, cpu = terms(device="cuda", **fused), terms(device="cpu", **fused)
    assert not any(name.startswith("attn.dropout") for name in cuda)
    assert cpu["attn.q_k_v"] == s * 3 * 64 * 4
    assert cpu["attn.softmax_out"] == cpu["attn.dropout_mask"] == cpu["attn.dropout_out"] == s * a * s * 4
    assert "attn.causal_mask" not in cpu


def test_rmsnorm_kernel_follows_the_device() -> None:
    """CUDA's fused RMSNorm keeps input and rstd; PyTorch's composite (CPU) computes in fp32 and
    keeps the upcast input and x * rstd as well."""
    shape = Shape(n_layers=1, d_model=64, n_heads=4, vocab_size=100, norm="rmsnorm")
    base = dict(seq_len=10, activation_dtype="bf16")  # a bf16 module: residual stream in bf16

    def norm1(**kw):
        terms = layer_activation_terms(shape, ActivationSetup(**{**base, **kw}))
        return {t.name: t.bytes for t in terms if t.name.startswith("norm1.")}

    assert norm1(device="cuda") == {"norm1.input": 10 * 64 * 2, "norm1.rstd": 10 * 4}
    composite = {"norm1.input": 10 * 64 * 4, "norm1.rstd": 10 * 4, "norm1.normalized": 10 * 64 * 4}
    assert norm1(device="cpu") == composite
    assert norm1(device="cuda", norm_impl="composite") == composite
