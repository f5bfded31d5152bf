"""A small study store with synthetic numbers, written through the study's own API (spec parsing, run
configs and hashes, Store.create / sync_runs / record_finished / record_error), so report tests never train.

Two scales (groups P100k and P400k), four shapes each, two learning rates, two seeds, a bench run per
shape; one run failed (its error stored) and one diverged. Losses follow
    loss = 1.6 + 40 / N^0.3 + 0.04 * (log2(aspect / 16))^2 + seed noise
so the best aspect ratio is near 16 at both scales (Kaplan's flat basin), and deeper shapes decode slower.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.bench.results import BenchResult, LatencyPoint
from depthwidth.bench.timing import Timing
from depthwidth.shapes.flops import flops
from depthwidth.shapes.hardware import get_hardware
from depthwidth.shapes.params import count_params
from depthwidth.study.expand import DataInfo, bench_config, train_config
from depthwidth.study.run_config import config_hash
from depthwidth.study.jobs import merge_curve
from depthwidth.study.spec import parse_spec
from depthwidth.study.store import Store
from depthwidth.study.baselines import write_baselines
from depthwidth.data.baselines import NgramBaselines
from depthwidth.artifact.result import TrainResult

SPEC = """
name = "fixture"
description = "synthetic <b>study</b> & friends"
hardware = "cpu"
seeds = [0, 1]

[[shape]]
n_layers = 2
d_model = 64
n_heads = 4

[data]
corpus = "shakespeare"
tokenizer = "byte"
seq_len = 64
batch_size = 8

[train]
tokens = 51200

[eval]
every = 10

[lr]
grid = [0.001, 0.003]

[bench]
prompt_lens = [32]
contexts = [48]

[report]                  # synthetic losses at 0.5 tokens per parameter on two scales: fit them anyway
min_tokens_per_param = 0.1
min_scales = 2
"""
#: the fixture's baselines (`baselines.json`, as a study run writes it): every synthetic loss is below this bigram
BIGRAM = 3.2
UNIGRAM = 3.5

GROUPS = {
    "P100k": ((1, 96), (2, 64), (4, 48), (8, 32)),
    "P400k": ((2, 128), (4, 96), (8, 64), (16, 48)),
}
TOKENS = {"P100k": 51200, "P400k": 204800}
CORPUS_HASH = "c0ffee" * 4
FAILED = ("P100k", "L1-H96-A6", 0.001, 1)
DIVERGED = ("P400k", "L16-H48-A3", 0.003, 0)


def true_loss(n: float, aspect: float) -> float:
    return 1.6 + 40.0 / n**0.3 + 0.04 * math.log2(aspect / 16.0) ** 2


def build_fixture_study(folder, *, fail_all: bool = False, bigram: float = BIGRAM, unigram: float = UNIGRAM) -> dict:
    """Write the fixture study into `folder`; returns {(group, label, lr, seed): loss} of completed runs.
    With `fail_all` every training run fails (the benches still complete). `bigram`, `unigram`: the
    baselines written beside the store."""
    spec = parse_spec(SPEC, source="fixture.toml")
    data = DataInfo(corpus_hash=CORPUS_HASH, vocab_size=256, train_tokens=1_000_000)
    base = spec.shapes[0]
    template = {"vocab_size": 256, "max_seq_len": spec.data.seq_len}
    rng = np.random.default_rng(0)
    rows, outcomes, losses = [], [], {}
    from depthwidth.shapes.shape import Shape

    for group, dims in GROUPS.items():
        for n_layers, d_model in dims:
            shape = Shape(n_layers=n_layers, d_model=d_model, n_heads=d_model // 16, **template)
            counts = count_params(shape)
            for seed in spec.seeds:
                for lr in spec.lr.values(d_model):
                    config = train_config(spec, data=data, shape=shape, tokens=TOKENS[group], lr=lr, seed=seed)
                    run_id = config_hash(config)
                    rows.append({"run_id": run_id, "kind": "train", "group": group, "shape_label": shape.label(),
                                 "lr": lr, "seed": seed, "lr_trials": 2, "config": config})
                    key = (group, shape.label(), lr, seed)
                    if key == FAILED or fail_all:
                        outcomes.append(("error", run_id, "RuntimeError: out of memory (synthetic)"))
                        continue
                    penalty = 0.0 if lr == 0.003 else 0.05
                    loss = true_loss(counts.non_embedding, shape.aspect_ratio) + penalty + rng.normal(0, 0.004)
                    status = "diverged" if key == DIVERGED else "completed"
                    if status == "completed":
                        losses[key] = loss
                    outcomes.append((status, run_id, _train_result(shape, config, status=status, loss=loss,
                                                                   seed=seed, tokens=TOKENS[group], rng=rng)))
            bconfig = bench_config(spec, shape=shape)
            bid = config_hash(bconfig)
            if not any(r["run_id"] == bid for r in rows):
                rows.append({"run_id": bid, "kind": "bench", "group": group, "shape_label": shape.label(),
                             "lr": None, "seed": None, "lr_trials": None, "config": bconfig})
                outcomes.append(("bench", bid, _bench_result(shape)))
    with Store.create(folder, name=spec.name, spec=spec.to_dict(), spec_text=spec.text, source=spec.source) as store:
        store.sync_runs(rows)
        for kind, run_id, payload in outcomes:
            store.mark_running(run_id, worker="fixture")
            if kind == "error":
                store.record_error(run_id, error=payload, final=True)
                continue
            result = payload.to_dict()
            curve = merge_curve(result.pop("curve", []), result.get("evals", []), tokens_per_step=512)
            store.record_finished(run_id, status="completed" if kind == "bench" else kind, result=result,
                                  curve=curve, wall_seconds=1.0, worker="fixture")
    write_baselines(folder, NgramBaselines(dataset_hash="d" * 16, vocab_size=256, smoothing="synthetic",
                                           unigram=unigram, bigram=bigram, targets=1000))
    assert base.n_layers == 2
    return losses


def _train_result(shape, config, *, status, loss, seed, tokens, rng) -> TrainResult:
    counts = count_params(shape)
    per_token = flops(shape, seq_len=64).train_per_token
    steps = tokens // (64 * 8)
    evals, curve = [], []
    for step in range(0, steps + 1, 10):
        t = step * 512
        v = loss + 1.5 * math.exp(-step / 25) + rng.normal(0, 0.003)
        if status == "diverged" and step > 40:
            break
        evals.append({"step": step, "tokens": t, "val_loss": v, "val_loss_by_slice": {"shakespeare": v}})
        curve.append({"step": step, "loss": v + 0.02, "lr": config["train"]["lr"], "grad_norm": 1.0, "seconds": 0.01,
                      "tokens_per_s": 51200.0 / shape.n_layers})
    done = status == "completed"
    tokens_per_s = 60000.0 / (1 + 0.3 * shape.n_layers)
    return TrainResult(
        status=status, val_loss=loss if done else None,
        val_loss_by_slice={"shakespeare": loss + 0.01, "python-docs": loss + 0.3} if done else {},
        val_loss_by_position=[], position_buckets=[], tokens_per_s=tokens_per_s,
        achieved_flops_per_s=per_token * tokens_per_s, mfu=per_token * tokens_per_s / 2e11, peak_flops=2e11,
        peak_flops_source="synthetic", peak_memory_bytes=counts.total * 16 + shape.n_layers * shape.d_model * 20000,
        saved_activation_bytes=None, state_bytes=counts.total * 16, peak_rss_bytes=None, params=counts.total,
        non_embedding_params=counts.non_embedding, train_flops_per_token=per_token, train_seconds=1.0,
        eval_seconds=0.1, steps=steps, tokens=tokens, curve=curve, evals=evals,
        batch_stream_hash=f"stream-seed{seed}", corpus_hash=CORPUS_HASH, dataset_hash="d" * 16,
        config_hash=config_hash(config), tokenizer="byte", vocab_size=256,
        diverged_at_step=None if done else 41, error=None if done else "loss 1e9 at step 41",
        shape=shape.to_dict(),
        probe_accuracy=probe_accuracy(shape, seed) if done else {},
    )


def probe_accuracy(shape, seed: int) -> dict:
    """Synthetic probe results: multi-hop grows with depth, recall with width (and a seed wobble)."""
    return {"multihop": {"1": min(1.0, 0.2 * shape.n_layers), "2": min(1.0, 0.05 * shape.n_layers + 0.01 * seed)},
            "recall": {"4": min(1.0, shape.d_model / 200)}}


def _bench_result(shape) -> BenchResult:
    decode_s = 1e-4 + 1.2e-4 * shape.n_layers + 2e-9 * count_params(shape).total
    prefill_s = 3 * decode_s
    hw = get_hardware("cpu")

    def timing(s):
        return Timing(median=s, q1=s * 0.98, q3=s * 1.03, min=s * 0.95, max=s * 1.1, n=5)

    latency = (
        LatencyPoint(variant="fp32", kind="prefill", batch=1, tokens=32, timing=timing(prefill_s),
                     predicted_s=prefill_s / 1.8),
        LatencyPoint(variant="fp32", kind="decode", batch=1, tokens=48, timing=timing(decode_s),
                     predicted_s=decode_s / 1.6),
    )
    return BenchResult(target=shape.label(), checkpoint=None, shape=shape.to_dict(), config={"dtype": "fp32"},
                       environment={"threads": 2}, hardware=hw.to_dict(), latency=latency, throughput=(),
                       kv_cache=(), quantization=None)
