"""Pipeline parallelism in the analytic core: stage layers and parameters (against the real module), the
micro-batches each stage keeps and the bubble (against a step-by-step simulation of Megatron-LM's 1F1B and
interleaved schedules), the point-to-point bytes, the Megatron-LM accounting, and the bad-flag errors."""

from collections import deque

import pytest
import torch

from depthwidth.errors import UserError
from depthwidth.model import Transformer
from depthwidth.shapes.comm import pipeline_p2p_bytes
from depthwidth.shapes.latency import predict_train_step
from depthwidth.shapes.memory import memory, params_per_device, state_bytes_per_param
from depthwidth.shapes.params import count_params
from depthwidth.shapes.pipeline import (
    PipelineSetup, bubble_ratio, in_flight, interleave_factor, stage_layers, stage_params,
)
from depthwidth.shapes.presets import PRESETS
from depthwidth.shapes.shape import Shape

GPT2 = PRESETS["gpt2-small"].shape
TINY = Shape(n_layers=10, d_model=64, n_heads=4, vocab_size=100, max_seq_len=32, bias="all", pos="learned",
             tie_embeddings=False)


def simulate(pp: int, v: int, m: int, *, tf: float = 1.0, tb: float = 2.0) -> dict:
    """Run Megatron-LM's schedule op by op: stage r's k-th forward is micro-batch (k // (pp*v))*pp + k % pp of
    chunk (k // pp) % v, its k-th backward the same micro-batch of chunk v-1 - (k // pp) % v; warm-up
    forwards (pp-r-1 for 1F1B, 2(pp-r-1) + (v-1)pp interleaved), then one forward and one backward at a time.
    A forward of virtual stage c*pp + r waits for the previous virtual stage's, a backward for the next
    one's. Returns the step time, the peak chunks kept per stage and chunk, and the sends per stage."""
    total = m * v

    def op(k: int, forward: bool) -> tuple[int, int]:
        chunk = (k // pp) % v
        return (k // (pp * v)) * pp + k % pp, chunk if forward else v - 1 - chunk

    ops = []
    for r in range(pp):
        warm = min(pp - r - 1 if v == 1 else 2 * (pp - r - 1) + (v - 1) * pp, total)
        seq = [("F", *op(k, True)) for k in range(warm)]
        for i in range(total - warm):
            seq += [("F", *op(warm + i, True)), ("B", *op(i, False))]
        seq += [("B", *op(i, False)) for i in range(total - warm, total)]
        ops.append(deque(seq))
    done: dict[tuple, float] = {}
    clock = [0.0] * pp
    peak = [[0] * v for _ in range(pp)]
    kept = [[0] * v for _ in range(pp)]
    best = [0] * pp
    sends = [0] * pp
    last = pp * v - 1
    while any(ops):
        progressed = False
        for r in range(pp):
            while ops[r]:
                kind, mb, chunk = ops[r][0]
                vs = chunk * pp + r
                dep = (("F", mb, vs - 1) if vs else None) if kind == "F" else (
                    ("B", mb, vs + 1) if vs < last else ("F", mb, vs))
                if dep is not None and dep not in done:
                    break
                ops[r].popleft()
                start = max(clock[r], done[dep] if dep else 0.0)
                clock[r] = start + (tf if kind == "F" else tb)
                done[(kind, mb, vs)] = clock[r]
                kept[r][chunk] += 1 if kind == "F" else -1
                if kind == "F" and sum(kept[r]) > best[r]:
                    best[r], peak[r] = sum(kept[r]), list(kept[r])
                sends[r] += (kind == "F" and vs < last) + (kind == "B" and vs > 0)
                progressed = True
        assert progressed, "the schedule deadlocked"
    return {"step": max(clock), "peak": [tuple(p) for p in peak], "sends": sends}


def test_layers_per_stage_even_and_uneven():
    assert stage_layers(12, PipelineSetup(pp=4)) == (3, 3, 3, 3)
    assert stage_layers(10, PipelineSetup(pp=4)) == (2, 2, 3, 3)  # the extra layers on the last stages
    assert stage_layers(105, PipelineSetup(pp=35, virtual_stages=3, microbatches=35)) == (3,) * 35


@pytest.mark.parametrize("tied", [False, True])
def test_stage_params_partition_the_real_module(tied):
    shape = TINY.with_(tie_embeddings=tied)
    with torch.device("meta"):
        model = Transformer(shape)
    setup = PipelineSetup(pp=4)
    start, expected = 0, []
    for rank, layers in enumerate(stage_layers(shape.n_layers, setup)):
        mods = list(model.blocks[start:start + layers])
        start += layers
        if rank == 0:
            mods += [model.embed, model.pos_embed]
        if rank == setup.pp - 1:
            mods += [model.final_norm, model.head if not tied else model.embed]  # tied: the last stage's copy
        expected.append(sum(p.numel() for mod in mods for p in mod.parameters()))
    assert stage_params(shape, setup) == tuple(expected)
    assert sum(expected) == count_params(shape).total + (shape.vocab_size * shape.d_model if tied else 0)


@pytest.mark.parametrize("name", ["gpt2-small", "llama-2-7b", "mobilellm-125m"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_one_stage_holds_what_params_per_device_says(name, tp):
    shape = PRESETS[name].shape
    assert stage_params(shape, PipelineSetup(pp=1), tp=tp) == (params_per_device(shape, tp=tp),)


@pytest.mark.parametrize(("pp", "v", "m"), [(4, 1, 8), (4, 1, 2), (3, 1, 7), (4, 2, 8), (4, 3, 4), (3, 2, 9),
                                            (8, 3, 64), (2, 2, 4)])
def test_in_flight_and_bubble_match_the_simulated_schedule(pp, v, m):
    sim = simulate(pp, v, m)
    setup = PipelineSetup(pp=pp, virtual_stages=v, microbatches=m)
    assert [in_flight(setup, r) for r in range(pp)] == sim["peak"]
    ideal = m * v * 3.0  # forward 1 + backward 2 per chunk and micro-batch
    assert sim["step"] / ideal - 1 == pytest.approx(bubble_ratio(pp=pp, virtual_stages=v, microbatches=m))
    p2p = pipeline_p2p_bytes(tokens=8, d_model=4, elem_bytes=2, pp=pp, virtual_stages=v, microbatches=m)
    assert p2p["sends"] == sum(sim["sends"]) and p2p["total"] == 64 * sum(sim["sends"])
    assert p2p["busiest_stage"] == 64 * max(sim["sends"])


def test_first_stage_keeps_n_layers_times_the_interleave_factor():
    for pp, v in ((8, 3), (35, 3), (4, 2)):
        setup = PipelineSetup(pp=pp, virtual_stages=v, microbatches=8 * pp)
        assert sum(in_flight(setup, 0)) == pp * v + pp - 1  # chunks of L/(pp*v) layers
        assert sum(in_flight(setup, 0)) / (pp * v) == pytest.approx(interleave_factor(setup))
    assert in_flight(PipelineSetup(pp=8, virtual_stages=3, microbatches=8), 0) == (8, 8, 8)  # all warm-up
    assert interleave_factor(PipelineSetup(pp=8)) == 1.0


def test_memory_per_stage_gpt2():
    m = memory(GPT2, seq_len=1024, micro_batch=2, train_precision="bf16-mixed", pp=4, microbatches=8)
    one = memory(GPT2, seq_len=1024, micro_batch=2, train_precision="bf16-mixed")
    stages = m.pipeline.stages
    assert [s.in_flight for s in stages] == [(4,), (3,), (2,), (1,)]
    assert [s.layers_kept for s in stages] == [12, 9, 6, 3]
    per_layer = one.activation_bytes_per_layer
    embed = sum(t.bytes for t in one.outside_terms if t.name.startswith("embed."))
    head = one.outside_activation_bytes - embed
    assert stages[0].kept_activation_bytes == 12 * per_layer + 4 * embed
    assert stages[3].kept_activation_bytes == 3 * per_layer + head
    assert stages[3].logits_bytes == one.logits_bytes and stages[0].logits_bytes == 0
    # the first stage keeps the whole model's block activations, as without a pipeline (Korthikanti eq. 5)
    assert stages[0].layer_activation_bytes == one.pipeline.stages[0].layer_activation_bytes == 12 * per_layer
    assert stages[0].params == 3 * count_params(GPT2).per_layer + 50257 * 768 + 1024 * 768
    assert stages[3].params == 3 * count_params(GPT2).per_layer + 2 * 768 + 50257 * 768  # ln_f, the tied copy
    # GPT-2's 50k vocabulary (the head's copy of the embedding, fp32 log-softmax, logits) makes the last
    # stage the fullest one; the per-device fields are that stage's
    assert max(stages, key=lambda s: s.total_bytes) is stages[3] and m.pipeline.peak.stage == 3
    assert (m.params_per_device, m.activation_bytes, m.logits_bytes) == (
        stages[3].params, stages[3].activation_bytes, stages[3].logits_bytes)
    assert m.total_training_bytes == stages[3].total_bytes and m.model_states_bytes == 16 * stages[3].params
    assert m.pipeline.bubble_ratio == pytest.approx(3 / 8)
    assert m.pipeline.p2p["message"] == 2 * 1024 * 768 * 4  # fp32 residual stream under AMP
    assert m.pipeline.p2p["total"] == 2 * 8 * 3 * m.pipeline.p2p["message"]
    # pp = 1 leaves memory() as it was
    assert one.activation_bytes == 12 * per_layer + one.recompute_bytes + one.outside_activation_bytes
    assert one.params_per_device == count_params(GPT2).total


def test_megatron_accounting():
    assert state_bytes_per_param(train_precision="bf16-mixed", param_dtype="fp32", optimizer="adamw",
                                 grad_dtype="fp32") == (2, 4, 12)  # 18 bytes (Megatron Core docs)
    amp = memory(GPT2, seq_len=1024, train_precision="bf16-mixed")
    meg = memory(GPT2, seq_len=1024, train_precision="bf16-mixed", convention="megatron")
    n = count_params(GPT2).total
    assert amp.model_states_bytes == 16 * n and meg.model_states_bytes == 18 * n
    terms = {t.name: t.bytes for t in meg.layer_terms}
    assert terms["norm1.input"] == 1024 * 768 * 2  # half-precision residual stream
    assert {t.name: t.bytes for t in amp.layer_terms}["norm1.input"] == 1024 * 768 * 4
    assert memory(GPT2, seq_len=1024, train_precision="bf16-mixed", convention="megatron",
                  residual_dtype="fp32").layer_terms == amp.layer_terms


def test_bubble_hook_in_the_step_time():
    one = predict_train_step(GPT2, hardware="h100", seq_len=1024, global_batch=16, pp=4)
    two = predict_train_step(GPT2, hardware="h100", seq_len=1024, global_batch=16, pp=4, virtual_stages=2)
    assert one.bubble_s == pytest.approx(one.by_op["compute"] * 3 / 16)
    assert two.bubble_s == pytest.approx(one.bubble_s / 2)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"pp": 13}, "pp=13"),
    ({"pp": 5, "virtual_stages": 2, "microbatches": 10}, "virtual_stages=2"),
    ({"virtual_stages": 2}, "virtual_stages=2"),
    ({"pp": 4, "virtual_stages": 3, "microbatches": 6}, "microbatches=6"),
    ({"pp": 0}, "pp=0"),
    ({"convention": "deepspeed"}, "convention"),
])
def test_bad_pipeline_values_name_the_field(kwargs, field):
    with pytest.raises(UserError, match=field):
        memory(GPT2, seq_len=128, **kwargs)


def test_p2p_message_per_tensor_parallel_rank():
    kw = {"tokens": 2048, "d_model": 1024, "elem_bytes": 2, "pp": 4, "microbatches": 8, "tp": 4}
    assert pipeline_p2p_bytes(**kw)["message"] == 2048 * 1024 * 2  # every tp rank sends the whole tensor
    assert pipeline_p2p_bytes(**kw, sp=True)["message"] == 2048 * 1024 * 2 // 4  # its sequence shard
    assert pipeline_p2p_bytes(**{**kw, "pp": 1})["total"] == 0
