"""The terminal tables render typed results (or their dicts) with the units formatter: every cell checked
here is a real value of a real shape, written the one way the units module writes it."""

import pytest
from rich.console import Console

from depthwidth.bench.results import BenchResult, KVCacheCheck, LatencyPoint, ThroughputPoint
from depthwidth.bench.timing import Timing
from depthwidth.present.bench import bench_tables
from depthwidth.present.plan import budget_text, compare_table, fmt, plan_tables
from depthwidth.present.probe import capacity_lines
from depthwidth.present.study import print_summary, shapes_table
from depthwidth.present.train import result_rows
from depthwidth.shapes.evaluate import Workload, compare, plan
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.study.fairness import FairnessReport
from depthwidth.study.summary import ShapeResult, StudySummary
from depthwidth.train.capacity import CapacityPoint
from depthwidth.artifact.result import TrainResult


def _text(*renderables) -> str:
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    for r in renderables:
        console.print(r)
    return console.export_text()


def _row(n_layers, d_model, losses, **kw) -> ShapeResult:
    s = Shape(n_layers=n_layers, d_model=d_model, n_heads=d_model // 8, vocab_size=256, max_seq_len=128)
    c = count_params(s)
    return ShapeResult(group="N500K", shape_label=s.label(), shape=s, params=c.total,
                       non_embedding_params=c.non_embedding, train_flops_per_token=6.0 * c.total,
                       lr_losses={1e-3: losses[0] + 0.1, 2.5e-3: sum(losses) / len(losses)}, best_lr=2.5e-3,
                       seed_losses=tuple(losses), **kw)


def _summary(rows) -> StudySummary:
    return StudySummary(name="demo", study_dir="demo-study", running=False, counts={"completed": 10, "pending": 0},
                        rows=tuple(rows), choices=(), fairness=FairnessReport(fair=True, checked_runs=10, findings=()),
                        failed=(), warnings=("L13-H56-A7 (N500K): best lr 0.0025 is the highest of its grid",))


def test_study_table_renders_the_shape_results():
    rows = [_row(13, 56, [2.51, 2.53], tokens_per_s=12_345.6, mfu=0.0412, measured_decode_ms=1.534,
                 bench_predicted_decode_ms=0.9612, measured_prefill_ms=4.2, bench_predicted_prefill_ms=None),
            _row(2, 144, [2.60], tokens_per_s=51_200.0)]
    text = _text(shapes_table(_summary(rows)))
    deep = next(line for line in text.splitlines() if "L13-H56-A7" in line)
    assert count_params(rows[0].shape).non_embedding == 490_728
    for cell in ("13", "56", "490.7K", "0.0025", "2.5200", "12,346", "4.1%", "4.2", "1.53 (0.961)"):
        assert cell in deep.split() or cell in deep, (cell, deep)
    wide = next(line for line in text.splitlines() if "L2-H144-A18" in line)
    assert "51,200" in wide and "2.6000" in wide and wide.rstrip().endswith("-")
    assert "group" not in text.splitlines()[2]  # one group: the column is left out

    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    print_summary(console, _summary(rows))
    out = console.export_text()
    assert "study 'demo' in demo-study: complete, 10 runs (10 completed)" in out
    assert "fair: yes (10 training runs" in out and "warning: L13-H56-A7 (N500K): best lr" in out


def test_the_shape_result_derives_what_it_does_not_store():
    r = _row(4, 96, [3.0, 3.2])
    assert r.key == "N500K/L4-H96-A12" and r.lr_grid == (1e-3, 2.5e-3) and r.lr_trials == 2
    assert r.val_loss == pytest.approx(3.1) and r.val_loss_std == pytest.approx(0.1414, abs=1e-4) and r.n_seeds == 2
    d = r.to_dict()
    assert d["shape_label"] == "L4-H96-A12" and d["val_loss"] == pytest.approx(3.1) and d["lr_losses"]["0.001"]
    assert "curves" not in d and d["shape"]["d_model"] == 96
    with pytest.raises(ValueError, match="seed_losses"):
        _row(4, 96, [float("nan")])


def test_plan_and_compare_tables_write_units():
    result = plan(hardware="h100", workload=Workload(seq_len=1024), params=124e6,
                  base=Shape(n_layers=1, d_model=64, n_heads=1, vocab_size=50304))
    data = result.to_dict()
    assert budget_text(data["family"]) == "124M parameters"
    text = _text(*plan_tables(data))
    l12 = next(line for line in text.splitlines() if "L12-H768-A12" in line and "MFLOP" in line)
    assert "798 MFLOP" in l12 and "2.46 GiB" in l12 and "27.1 MiB" in l12 and "36 KiB" in l12
    assert fmt("params.total", 124_439_808) == "124.4M" and fmt("latency.tokens_per_s", 1709.7) == "1,710"
    cmp = compare([("a", Shape(n_layers=12, d_model=768, n_heads=12, vocab_size=50257)),
                   ("b", Shape(n_layers=24, d_model=512, n_heads=8, vocab_size=50257))],
                  hardware="h100", workload=Workload(seq_len=1024))
    text = _text(compare_table(cmp.to_dict()))
    assert "b / a" in text and "2.00x" in text and "1.33x" in text  # layers; KV cache per token


def test_iso_compute_budget_is_written_in_flops():
    family = {"kind": "iso-compute", "target": 1e19, "target_name": "train_flops", "tokens_per_param": 20,
              "tokens": None}
    assert budget_text(family) == "10 EFLOP training compute, 20 tokens/param"


def test_train_table_rows():
    result = TrainResult(
        status="completed", val_loss=1.8654, val_loss_by_slice={"shakespeare": 1.8654},
        val_loss_by_position=[2.1, 1.9], position_buckets=[[0, 32], [32, 64]], tokens_per_s=25_123.4,
        achieved_flops_per_s=1.27e11, mfu=0.2953, peak_flops=4.3e11, peak_flops_source="measured profile",
        peak_memory_bytes=41 * 2**20, saved_activation_bytes=30 * 2**20, state_bytes=11 * 2**20,
        peak_rss_bytes=900 * 2**20, params=840_192, non_embedding_params=786_432, train_flops_per_token=5.05e6,
        train_seconds=151.2, eval_seconds=3.4, steps=2000, tokens=1_536_000, curve=[], evals=[],
        batch_stream_hash="ab" * 16, corpus_hash="cd" * 16, dataset_hash="ef" * 8, config_hash="0" * 64,
        tokenizer="char", vocab_size=65, threads=1, shape={"n_layers": 4, "d_model": 128})
    rows = dict(result_rows(result))
    assert rows["val loss (nats/token)"] == "1.8654" and rows["val loss by position"] == "2.100 1.900"
    assert rows["params (non-embedding)"] == "840,192 (786,432)"
    assert rows["steps / tokens"] == "2,000 / 1,536,000" and rows["tokens/s (training)"] == "25,123"
    assert rows["achieved FLOP/s"] == "127 GFLOP/s"
    assert rows["MFU"] == "29.53% of 430 GFLOP/s (measured profile)"
    assert rows["peak memory"] == "41 MiB (activations 30 MiB, peak RSS 900 MiB)"
    assert rows["time train / eval"] == "0:02:31 / 3.4 s"


def test_bench_tables():
    t = Timing(median=3.06e-4, q1=3.05e-4, q3=3.06e-4, min=3.0e-4, max=3.2e-4, n=5)
    result = BenchResult(
        target="L4-H128-A4", checkpoint=None, shape={}, config={"dtype": "fp32"}, environment={},
        hardware={"name": "measured-cpu"},
        latency=(LatencyPoint(variant="fp32", kind="decode", batch=1, tokens=63, timing=t, predicted_s=1.4e-4),),
        throughput=(ThroughputPoint(variant="fp32", batch=8, prompt_len=16, new_tokens=16, timing=t,
                                    predicted_s=2e-4),),
        kv_cache=(KVCacheCheck(variant="fp32", dtype="fp32", batch=8, tokens=31, measured_bytes=1_015_808,
                               analytic_bytes=1_015_808),), quantization=None)
    text = _text(*bench_tables(result.to_dict()))
    decode = next(line for line in text.splitlines() if "decode @ctx" in line)
    assert "0.306" in decode and "0.14" in decode and "2.19x" in decode
    assert "418,301" in text  # 8 x 16 tokens in 0.306 ms
    assert text.count("1,015,808") == 2 and "yes" in text


def test_capacity_lines():
    points = [CapacityPoint(n_facts=1024, status="completed", accuracy=0.912, bits=9308.6, bits_per_param=0.0123,
                            steps=640, val_loss=0.4)]
    lines = capacity_lines("L2-H64-A4", params=757_000, points=points)
    assert lines[0].startswith("L2-H64-A4: 757,000 parameters")
    assert lines[2].split() == ["1,024", "640", "91.2%", "9,309", "0.0123", "completed"]
    assert lines[3] == "most stored: 9,309 bits at 1,024 facts = 0.0123 bits per parameter"
