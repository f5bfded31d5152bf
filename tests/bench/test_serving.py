"""Serving benchmark: sane numbers from a tiny run, exact KV-cache bytes, clear errors on bad input.
No timing assertions: only that times are positive and ratios are what they claim to be."""

from __future__ import annotations

import math

import pytest
import torch

from depthwidth.bench.serving import BenchConfig, bench
from depthwidth.bench.timing import Timing, time_call
from depthwidth.model import Transformer
from depthwidth.model.generate import new_cache
from depthwidth.shapes.hardware import get_hardware
from depthwidth.shapes.shape import Shape

CPU = get_hardware("cpu")  # a fixed spec, so tests do not measure a profile
TINY = Shape(n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, vocab_size=64, max_seq_len=48, pos="rope")
QUICK = dict(prompt_lens=(4, 16), contexts=(4, 20), batches=(1, 3), repeat=2, warmup=1, new_tokens=4,
             throughput_prompt_len=8)


def _expected_kv_bytes(shape: Shape, *, batch: int, tokens: int, elem: int) -> int:
    # keys and values, every layer, n_kv_heads heads of head_dim, per cached token of every sequence
    return 2 * shape.n_layers * shape.n_kv_heads * shape.head_dim * elem * tokens * batch


def test_tiny_bench_returns_positive_times_and_consistent_ratios() -> None:
    result = bench(TINY, BenchConfig(**QUICK), hardware=CPU)
    kinds = [(p.kind, p.tokens) for p in result.latency]
    assert kinds == [("prefill", 4), ("prefill", 16), ("decode", 4), ("decode", 20)]
    for p in result.latency:
        assert p.timing.n == 2 and 0 < p.timing.min <= p.timing.median <= p.timing.max
        assert p.predicted_s > 0
        assert p.ratio == pytest.approx(p.timing.median / p.predicted_s)
    assert [t.batch for t in result.throughput] == [1, 3]
    for t in result.throughput:
        assert t.tokens_per_s == pytest.approx(t.batch * 4 / t.timing.median)
        assert t.predicted_tokens_per_s == pytest.approx(t.batch * 4 / t.predicted_s)
    # a generation is predicted as more than its prefill alone, and bigger batches predict more tokens/s
    assert result.throughput[0].predicted_s > result.latency[0].predicted_s
    assert result.throughput[1].predicted_tokens_per_s > result.throughput[0].predicted_tokens_per_s
    env = result.environment
    assert env["torch"] == torch.__version__ and env["threads"] >= 1 and env["dtype"] == "fp32"
    d = result.to_dict()
    assert d["config"]["prompt_lens"] == [4, 16] and d["hardware"]["name"] == "cpu"
    assert result.quantization is None


@pytest.mark.parametrize("dtype,elem", [("fp32", 4), ("bf16", 2)])
def test_kv_cache_bytes_in_the_result_equal_the_analytic_value(dtype: str, elem: int) -> None:
    result = bench(TINY, BenchConfig(**{**QUICK, "dtype": dtype}), hardware=CPU)
    # decode at contexts 4 and 20 (batch 1), throughput after 8 + 4 - 1 tokens at batches 1 and 3
    assert [(c.batch, c.tokens) for c in result.kv_cache] == [(1, 4), (1, 20), (1, 11), (3, 11)]
    for c in result.kv_cache:
        assert c.dtype == dtype
        assert c.measured_bytes == c.analytic_bytes
        assert c.analytic_bytes == _expected_kv_bytes(TINY, batch=c.batch, tokens=c.tokens, elem=elem)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_kv_cache_tensor_bytes_match_memory_formula(kv_heads: int) -> None:
    from depthwidth.shapes.memory import kv_cache_bytes_per_token

    shape = TINY.with_(n_kv_heads=kv_heads)
    model = Transformer(shape).eval()
    cache = new_cache(model, batch_size=2, max_len=9)
    with torch.inference_mode():
        model(torch.zeros(2, 9, dtype=torch.long), cache=cache)
    measured = sum(t.numel() * t.element_size() for t in cache.keys + cache.values)
    assert measured == kv_cache_bytes_per_token(shape, dtype="fp32") * 9 * 2
    assert measured == _expected_kv_bytes(shape, batch=2, tokens=9, elem=4)


def test_int8_variant_is_measured_next_to_fp32() -> None:
    shape = TINY.with_(tie_embeddings=False, ffn="swiglu")
    result = bench(shape, BenchConfig(**{**QUICK, "quantize": "int8", "batches": (2,)}), hardware=CPU)
    assert [p.variant for p in result.latency] == ["fp32"] * 4 + ["int8"] * 4
    assert [t.variant for t in result.throughput] == ["fp32", "int8"]
    assert all(p.timing.median > 0 and p.ratio > 0 for p in result.latency)
    q = result.quantization
    # per block qkv, out, gate, up, down; plus the untied head
    assert q.quantized_linears == 5 * shape.n_layers + 1
    assert q.weight_bytes_after < q.weight_bytes_before
    assert q.val_loss_before is None and q.val_loss_change is None  # random weights: speed only
    # d_model 32 is not a multiple of the group size 128; d_ff 128 is
    assert [f.split(" ")[:3] for f in q.lint_findings] == [["DW005", "d_model", "32"]]
    # int8 keeps an fp32 KV cache
    assert {c.dtype for c in result.kv_cache if c.variant == "int8"} == {"fp32"}


def test_lengths_longer_than_the_position_table_are_refused() -> None:
    with pytest.raises(ValueError, match=r"contexts: .*49 positions.*max_seq_len=48"):
        bench(TINY, BenchConfig(**{**QUICK, "contexts": (48,)}), hardware=CPU)
    with pytest.raises(ValueError, match=r"prompt_lens: 49 tokens exceed max_seq_len=48"):
        bench(TINY, BenchConfig(**{**QUICK, "prompt_lens": (49,)}), hardware=CPU)
    with pytest.raises(ValueError, match="throughput_prompt_len \\+ new_tokens = 52"):
        bench(TINY, BenchConfig(**{**QUICK, "new_tokens": 44}), hardware=CPU)


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(dtype="fp16"), "dtype='fp16'.*fp32, bf16"),
        (dict(quantize="int4"), "quantize='int4'"),
        (dict(repeat=0), "repeat=0 must be an integer >= 1"),
        (dict(prompt_lens=()), "prompt_lens=\\(\\) must be a non-empty"),
        (dict(contexts=(8, -1)), "contexts contains -1"),
        (dict(batches=(4, 4)), "batches=\\(4, 4\\) has repeated"),
        (dict(threads=0), "threads=0"),
    ],
)
def test_config_validation_names_the_field(changes: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BenchConfig(**changes)


def test_progress_reports_every_step() -> None:
    seen = []
    bench(TINY, BenchConfig(**{**QUICK, "batches": ()}), hardware=CPU, progress=lambda *a: seen.append(a))
    assert [s[1:] for s in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert seen[0][0] == "fp32 prefill 4"


def test_timing_statistics() -> None:
    t = Timing.from_samples([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (t.min, t.q1, t.median, t.q3, t.max, t.n) == (1.0, 2.0, 3.0, 4.0, 5.0, 5)
    assert t.iqr == 2.0
    calls = []
    timing = time_call(lambda: calls.append("run"), repeat=3, warmup=2, setup=lambda: calls.append("setup"))
    assert calls == ["setup", "run"] * 5 and timing.n == 3 and math.isfinite(timing.median)
    with pytest.raises(ValueError, match="samples is empty"):
        Timing.from_samples([])


def _stored_profile(*, threads: int, block: bool = True, small_ops: bool = True):
    """A full, complete profile of this machine at `threads` threads, saved where the bench looks
    (`small_ops`: with kernel curves and the per-dispatched-op cost, as this version measures)."""
    from depthwidth.machine import EAGER_BLOCK_OP, HardwareProfile, device_name, profile_path, save_profile

    overheads = {"add": 1e-6, **({EAGER_BLOCK_OP: 4e-6} if block else {}), **({"dispatch_op": 2e-6} if small_ops else {})}
    curves = {"matmul:fp32": [[1e6, 1e-5]], "gemv:fp32": [[1e4, 1e-6]], "attention@16:fp32": [[1e6, 2e-5]]} \
        if small_ops else {}
    profile = HardwareProfile(
        device="cpu", device_name=device_name("cpu"), threads=threads, gemm=(), peak_flops={"fp32": 1e11, "bf16": 2e11},
        copy_bandwidth=2e10, op_overhead_s=4e-6, op_overheads=overheads, mem_capacity=8e9,
        torch_version=torch.__version__, created="2026-01-01T00:00:00+00:00", op_curves=curves,
        kernel_in_forward={"fp32": [[1e-5, 1.5]]} if small_ops else {},
    )
    return save_profile(profile, profile_path(threads=threads))


def test_measured_hardware_is_the_stored_profile_of_these_threads(tmp_path, monkeypatch) -> None:
    from depthwidth.bench.serving import bench_hardware

    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    path = _stored_profile(threads=1)
    before = path.read_text()
    spec = bench_hardware("measured", threads=1, dtype="bf16")
    assert spec.name == "measured-cpu" and spec.peak("fp32") == 1e11 and spec.op_overhead_s == 4e-6
    assert path.read_text() == before  # it fitted: nothing measured, nothing rewritten
    result = bench(TINY, BenchConfig(**{**QUICK, "batches": (), "threads": 1}))
    assert result.hardware["name"] == "measured-cpu" and result.hardware["mem_bandwidth"] == 2e10
    assert spec.dispatch_overhead_s == 2e-6 and spec.op_curves["matmul:fp32"] == ((1e6, 1e-5),)
    assert spec.in_forward("fp32") == ((1e-5, 1.5),) and spec.in_forward("bf16") == ()
    # a GPU row never stands beside a CPU measurement: the bench predicts with the CPU it measures on
    assert bench_hardware("h100", threads=1).name == "measured-cpu"
    assert bench_hardware("cpu", threads=1).name == "cpu"
    assert bench_hardware(str(path), threads=1).mem_bandwidth == 2e10
    with pytest.raises(ValueError, match="hardware: unknown hardware 'h900'.*'measured'"):
        bench_hardware("h900", threads=1)


def test_a_profile_of_an_earlier_version_gets_its_small_op_costs_once(tmp_path, monkeypatch) -> None:
    from depthwidth.bench.serving import bench_hardware
    from depthwidth.machine import load_profile

    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    from depthwidth.bench.hw import IN_FORWARD_SHAPES

    path = _stored_profile(threads=1, small_ops=False)  # an old profile: no curves, no dispatch cost
    spec = bench_hardware("measured", threads=1)
    stored = load_profile(path)
    assert {"matmul:fp32", "gemv:fp32", "attention@8:fp32", "attention@128:fp32", "gelu:fp32", "norm:fp32"} <= set(stored.op_curves)
    factors = stored.kernel_in_forward["fp32"]  # one point per reference forward, by seconds per kernel call
    assert len(factors) == len(IN_FORWARD_SHAPES) and all(t > 0 and 0 < f < 100 for t, f in factors)
    assert spec.in_forward("fp32") == factors
    assert 0 < stored.op_overheads["dispatch_op"] < 1e-3 and spec.dispatch_overhead_s == stored.op_overheads["dispatch_op"]
    assert stored.peak_flops["fp32"] == 1e11 and stored.op_overhead_s == 4e-6  # the rest is kept as it was
    before = path.read_text()
    bench_hardware("measured", threads=1)
    assert path.read_text() == before  # measured once


def test_default_lengths_are_cut_to_the_position_table() -> None:
    small = TINY.with_(max_seq_len=64)
    config = BenchConfig(batches=()).fitted(small)
    assert config.prompt_lens == (16, 64) and config.contexts == (16,)
    assert BenchConfig(batches=()).fitted(TINY.with_(max_seq_len=8)).contexts == (7,)
    assert BenchConfig(batches=()).fitted(TINY.with_(max_seq_len=1024)).contexts == (16, 64, 256)
    # lengths given explicitly are never cut, only refused
    with pytest.raises(ValueError, match="prompt_lens: 100 tokens exceed max_seq_len=64"):
        BenchConfig(prompt_lens=(100,), batches=()).fitted(small)
    result = bench(small, BenchConfig(batches=(), repeat=1, warmup=0), hardware=CPU)
    assert [p.tokens for p in result.latency] == [16, 64, 16]
    assert result.config["contexts"] == [16]
