"""Where a bench runs (cpu, cuda, cuda:N, auto), how it times, what it counts, and CUDA-graph decode
(the last on a GPU only)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from depthwidth.bench.config import BenchConfig, resolve_device
from depthwidth.bench.dispatch import DispatchCounter, count_dispatched
from depthwidth.bench.predict import Predictor
from depthwidth.bench.serving import bench, bench_hardware
from depthwidth.bench.timing import time_call
from depthwidth.errors import UserError
from depthwidth.model.generate import new_cache
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.hardware import HARDWARE
from depthwidth.shapes.shape import Shape

TINY = Shape(n_layers=2, d_model=32, n_heads=4, vocab_size=64, max_seq_len=48)
CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "cuda:3", "auto"])
def test_devices_are_accepted(device) -> None:
    assert BenchConfig(device=device, batches=()).device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "tpu:0", "", None])
def test_bad_devices_are_refused_in_one_line(device) -> None:
    with pytest.raises(UserError, match="device=.* expected auto, cpu, cuda or cuda:N"):
        BenchConfig(device=device)


def test_int8_is_refused_on_cuda_and_fp16_on_the_cpu() -> None:
    with pytest.raises(UserError, match="quantize='int8' runs on the CPU only"):
        BenchConfig(device="cuda", quantize="int8")
    with pytest.raises(UserError, match="no fp16 on CPU"):
        BenchConfig(dtype="fp16")
    assert BenchConfig(device="cuda", dtype="fp16").dtype == "fp16"
    # the config of a CPU run is written as before the device setting existed
    assert "device" not in BenchConfig().to_dict() and BenchConfig(device="cuda").to_dict()["device"] == "cuda"


@pytest.mark.skipif(CUDA, reason="checks the refusal on a machine without CUDA")
def test_a_cuda_device_torch_does_not_see_is_refused() -> None:
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UserError, match="device='cuda:1' but torch sees no CUDA device"):
        resolve_device("cuda:1")
    with pytest.raises(UserError, match="sees no CUDA device"):
        bench(TINY, BenchConfig(device="cuda", batches=(), repeat=1))


def test_the_dispatch_counter_counts_each_aten_op() -> None:
    x = torch.ones(4, 4)
    assert count_dispatched(lambda: torch.add(x, x)) == 1
    with DispatchCounter() as counter:
        (x @ x).relu().sum()
    assert dict(counter.ops) == {"aten.mm": 1, "aten.relu": 1, "aten.sum": 1} and counter.total == 3


def test_a_decode_step_dispatches_the_same_ops_per_layer() -> None:
    counts = {}
    for n_layers in (1, 3):
        model = Transformer(TINY.with_(n_layers=n_layers)).eval()
        cache = new_cache(model, batch_size=1, max_len=9)
        with torch.inference_mode():
            model(torch.zeros(1, 8, dtype=torch.long), cache=cache)

            def step(model=model, cache=cache) -> None:
                cache.length = 8
                model(torch.zeros(1, 1, dtype=torch.long), cache=cache)
            counts[n_layers] = count_dispatched(step)
            assert count_dispatched(step) == counts[n_layers]  # a pure function of the call
    per_layer = (counts[3] - counts[1]) / 2
    assert per_layer == int(per_layer) and 20 <= per_layer <= 40  # about three aten ops per inventory op
    assert counts[1] - per_layer > 0  # embedding, position, final norm, head


def test_time_call_on_the_cpu_times_each_call_after_its_setup() -> None:
    calls = []
    timing = time_call(lambda: calls.append("fn"), repeat=3, warmup=2, setup=lambda: calls.append("setup"))
    assert calls == ["setup", "fn"] * 5 and timing.n == 3 and timing.min >= 0


def test_int8_is_predicted_with_a_cpu_rate_never_a_gpu_one() -> None:
    assert Predictor(TINY, HARDWARE["h100-sxm"], attn_impl="sdpa").dtype("int8") == "fp32"
    cpu_int8 = dataclasses.replace(HARDWARE["cpu"], peak_flops={**HARDWARE["cpu"].peak_flops, "int8": 1e12})
    assert Predictor(TINY, cpu_int8, attn_impl="sdpa").dtype("int8") == "int8"
    assert Predictor(TINY, HARDWARE["cpu"], attn_impl="sdpa").dtype("bf16+cudagraph") == "bf16"


def test_a_cpu_bench_records_its_device_and_counts_its_ops(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    spec = dataclasses.replace(HARDWARE["cpu"], dispatch_overhead_s=1e-3)  # 1 ms per op: the count dominates
    result = bench(TINY, BenchConfig(prompt_lens=(8,), contexts=(8,), batches=(), repeat=1, warmup=0), hardware=spec)
    assert result.environment["device"] == "cpu" and result.environment["device_name"]
    decode = next(p for p in result.latency if p.kind == "decode")
    assert 40 <= decode.predicted_s / 1e-3 <= 100  # about 30 aten ops per layer, 2 layers, plus the ends
    assert all(p.variant == "fp32" for p in result.latency)  # no CUDA-graph points on the CPU


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_graph_decode_replays_the_eager_step() -> None:
    from depthwidth.bench.cudagraph import capture_decode

    model = Transformer(TINY).cuda().eval()
    cache = new_cache(model, batch_size=1, max_len=9)
    with torch.inference_mode():
        model(torch.zeros(1, 8, dtype=torch.long, device="cuda"), cache=cache)
        step = torch.ones(1, 1, dtype=torch.long, device="cuda")
        cache.length = 8
        model(step, cache=cache)
        replay = capture_decode(model, step, cache, context=8)
        before = [k.clone() for k in cache.keys]
        replay()
        torch.cuda.synchronize()
    assert cache.length == 8 and all(torch.equal(a, b) for a, b in zip(before, cache.keys, strict=True))
    timing = time_call(replay, repeat=5, warmup=2, device="cuda")
    assert timing.median > 0


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_a_cuda_bench_measures_on_the_gpu_with_graphs(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path))
    result = bench(TINY, BenchConfig(device="cuda", dtype="bf16", prompt_lens=(8,), contexts=(8,), batches=(1,),
                                     repeat=3))
    assert result.environment["device"] == "cuda" and result.hardware["kind"] == "gpu"
    variants = {p.variant for p in result.latency if p.kind == "decode"}
    assert variants == {"bf16", "bf16+cudagraph"}
    assert bench_hardware("cpu", threads=1, device="cuda").kind == "gpu"
