"""One-shot validation of depthwidth's CUDA paths on one GPU (about 8 minutes), written as one JSON.

Runs on a bare GPU machine: it installs nothing, imports depthwidth from ../src when the package is
not installed, needs only torch (any 2.x with CUDA), trains on the package's own corpus
("python-docs": CPython's pydoc_data, in every Python), and treats Ray as optional. Every section
runs in its own try block: a failure is written with its error line and the rest still run. On a
machine without CUDA it runs the sections that make sense there at small sizes and lists the others
under "skipped" with the reason.

Sections and the result expected on a healthy H100/H200 (each section's JSON has "expected"):
  profile   measured GEMM peaks per dtype and copy bandwidth (depthwidth.machine) against the
            hardware table row of this GPU (shapes.hardware.match_gpu), and one bf16 8192^3 GEMM
            timed with CUDA events. Expected: bf16 measured/vendor dense 0.6-0.85, copy 0.8-0.95 of
            the datasheet bandwidth, the event-timed GEMM within 10% of the profile's bf16 peak.
  memory    a small training run's peak CUDA memory and saved-activation bytes against the analytic
            `shapes.memory.memory` (model states + activations). Expected: peak/analytic 0.8-1.3,
            saved activations/analytic 0.9-1.1; the profile's GEMM is not in the peak.
  mfu       GPT-2 small (124M), bf16, seq 1024, eager and torch.compile, through the public
            `depthwidth.train.train`. Expected: compiled MFU >= 0.40 of the vendor dense bf16 peak
            (nanoGPT reaches 0.40-0.50 on A100/H100), compiled faster than eager.
  resume    a run stopped after its first checkpoint and resumed against the same run uninterrupted.
            Expected: CPU bit-for-bit equal losses; CUDA equal within 1e-4 with deterministic=True.
  sdpa      the aten kernel scaled_dot_product_attention picks per dtype (profiler op names) for a
            (1, 12, 1024, 64) causal attention. Expected CUDA: flash for bf16 and fp16, efficient or
            math for fp32; CPU: the flash CPU kernel for fp32 and bf16.
  serving   batch-1 prefill (64 tokens) and decode (after 64 cached) of the demo's deepest and widest
            shapes and GPT-2 small, eager and replayed as a CUDA graph, measured / predicted by the
            roofline (eager and execution "graph"). Expected: eager decode of small shapes
            launch-bound (deep slower than wide), CUDA-graph decode several times faster for the small
            shapes, ratios within 1.5x where the profile has kernel curves.
  ray       if Ray is installed and a GPU is present: a task with num_gpus=1 and max_calls=1 sees
            exactly one GPU in CUDA_VISIBLE_DEVICES and torch. Expected: visible == 1.

    python benchmarks/gpu_check.py [--out gpu_check.json] [--quick] [--sections a,b] [--device cuda:0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

try:
    import depthwidth  # noqa: F401
except ImportError:  # a checkout on a bare machine: use ../src
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import torch

SECTIONS = ("profile", "memory", "mfu", "resume", "sdpa", "serving", "ray")
CUDA_ONLY = {"mfu": "GPT-2 small training takes hours on a CPU", "ray": "no GPU to assign"}
CORPUS = "python-docs"
#: the result each section should show on a healthy H100/H200 (the --help text says the same)
EXPECTED = {
    "profile": "bf16 measured/vendor dense 0.6-0.85; copy 0.8-0.95 of the datasheet; timed GEMM within 10% of the peak",
    "memory": "peak/analytic 0.8-1.3; saved activations/analytic 0.9-1.1",
    "mfu": "compiled mfu_vendor >= 0.40; compiled faster than eager",
    "resume": "CPU: bit_for_bit true; CUDA (deterministic): max_curve_loss_difference <= 1e-4",
    "sdpa": "CUDA: flash for bf16 and fp16, efficient or math for fp32; CPU: flash_attention_for_cpu",
    "serving": "eager decode deep slower than wide; cudagraph decode several times faster on small shapes",
    "ray": "one_gpu_each and fresh_process_each true",
}


def _row(device: str):
    from depthwidth.shapes.hardware import HARDWARE, match_gpu

    if not device.startswith("cuda"):
        return None
    name = match_gpu(torch.cuda.get_device_name(torch.device(device)),
                     mem_capacity=torch.cuda.get_device_properties(torch.device(device)).total_memory)
    return HARDWARE[name] if name else None


def section_profile(device: str, quick: bool) -> dict:
    from depthwidth.bench.timing import time_call
    from depthwidth.machine import measure_profile

    profile = measure_profile(device=device, quick=quick)
    row = _row(device)
    out = {"device_name": profile.device_name, "peak_flops": dict(profile.peak_flops),
           "copy_bandwidth": profile.copy_bandwidth, "emulated": dict(getattr(profile, "emulated", {}) or {}),
           "table_row": row.name if row else None}
    if row:
        out["measured_over_vendor"] = {d: v / row.peak_flops[d] for d, v in profile.peak_flops.items()
                                       if d in row.peak_flops}
        out["bandwidth_over_datasheet"] = profile.copy_bandwidth / row.mem_bandwidth
    n = 1024 if quick or not device.startswith("cuda") else 8192
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    timing = time_call(lambda: torch.mm(a, b), repeat=5, warmup=2, device=device)
    key = "bf16" if dtype == torch.bfloat16 else "fp32"
    out["timed_gemm"] = {"n": n, "dtype": key, "median_s": timing.median, "flops_per_s": 2 * n**3 / timing.median,
                         "over_profile_peak": 2 * n**3 / timing.median / profile.peak_flops.get(key, float("nan")),
                         "timer": "cuda events" if device.startswith("cuda") else "perf_counter"}
    return out


def _small_config(device: str, quick: bool, **kw):
    from depthwidth.artifact.config import TrainConfig

    base = dict(corpus=CORPUS, tokenizer="byte", seq_len=128 if quick else 256, batch_size=8, steps=4 if quick else 20,
                device=device, eval_windows=4, lr=1e-3)
    return TrainConfig(**{**base, **kw})


def section_memory(device: str, quick: bool, tmp: Path) -> dict:
    from depthwidth.shapes.memory import memory
    from depthwidth.shapes.shape import Shape
    from depthwidth.train import train

    shape = Shape(n_layers=4, d_model=256, n_heads=4, vocab_size=256, max_seq_len=256)
    config = _small_config(device, quick, dtype="fp32", compile=False)
    result = train(shape, config, out_dir=tmp / "memory")
    analytic = memory(shape, seq_len=config.seq_len, micro_batch=config.batch_size, attn_impl="fused")
    out = {"peak_memory_bytes": result.peak_memory_bytes, "saved_activation_bytes": result.saved_activation_bytes,
           "analytic_total_training_bytes": analytic.total_training_bytes,
           "analytic_activation_bytes": analytic.activation_bytes, "device": result.device, "dtype": result.dtype}
    if result.peak_memory_bytes:
        out["peak_over_analytic"] = result.peak_memory_bytes / analytic.total_training_bytes
    if result.saved_activation_bytes:
        out["saved_over_analytic"] = result.saved_activation_bytes / analytic.activation_bytes
    return out


def section_mfu(device: str, quick: bool, tmp: Path) -> dict:
    from depthwidth.shapes.presets import get_preset
    from depthwidth.train import train

    shape = get_preset("gpt2-small").shape
    out = {}
    for compiled in (False, True):
        config = _small_config(device, quick, seq_len=1024, batch_size=8 if quick else 16, steps=10 if quick else 30,
                               dtype="bf16", cuda_dtype="bf16", compile=compiled, eval_windows=2)
        r = train(shape, config)
        out["compile" if compiled else "eager"] = {
            "tokens_per_s": r.tokens_per_s, "mfu_measured_peak": r.mfu, "mfu_vendor": getattr(r, "mfu_vendor", None),
            "vendor_peak_flops": getattr(r, "vendor_peak_flops", None), "train_seconds": r.train_seconds,
            "status": r.status}
    return out


class _Stop(Exception):
    pass


def section_resume(device: str, quick: bool, tmp: Path) -> dict:
    from depthwidth.shapes.shape import Shape
    from depthwidth.train import train

    shape = Shape(n_layers=2, d_model=64, n_heads=4, vocab_size=256, max_seq_len=128)
    config = _small_config(device, True, steps=8, checkpoint_every=4, deterministic=device.startswith("cuda"),
                           compile=False)
    reference = train(shape, config, out_dir=tmp / "reference")

    def stop(p) -> None:
        if p.phase == "train" and p.step > 4:
            raise _Stop

    try:
        train(shape, config, out_dir=tmp / "resumed", progress=stop)
    except _Stop:
        pass
    resumed = train(shape, config, out_dir=tmp / "resumed", resume=True)
    ref = [c["loss"] for c in reference.curve]
    res = [c["loss"] for c in resumed.curve]
    diff = max((abs(a - b) for a, b in zip(ref, res, strict=False)), default=float("nan"))
    return {"reference_val_loss": reference.val_loss, "resumed_val_loss": resumed.val_loss,
            "max_curve_loss_difference": diff, "bit_for_bit": ref == res and reference.val_loss == resumed.val_loss,
            "resumes": getattr(resumed, "resumes", None), "steps": resumed.steps}


def section_sdpa(device: str, quick: bool) -> dict:
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if device.startswith("cuda"):
        dtypes["fp16"] = torch.float16
    T = 256 if quick and not device.startswith("cuda") else 1024
    out = {}
    for name, dt in dtypes.items():
        q = torch.randn(1, 12, T, 64, device=device, dtype=dt)
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
        with profile(activities=activities) as prof:
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
        kernels = sorted({e.key for e in prof.key_averages() if "scaled_dot_product" in e.key and "_" in e.key[6:]})
        out[name] = [k for k in kernels if k != "aten::scaled_dot_product_attention"] or kernels
    return out


def section_serving(device: str, quick: bool) -> dict:
    from depthwidth.bench.serving import BenchConfig, bench
    from depthwidth.shapes.presets import get_preset
    from depthwidth.shapes.shape import Shape

    demo = dict(vocab_size=256, max_seq_len=128, ffn="gelu", norm="layernorm", pos="learned", bias="none",
                tie_embeddings=True)
    shapes = {"L13-H56": Shape(n_layers=13, d_model=56, n_heads=7, **demo),
              "L2-H144": Shape(n_layers=2, d_model=144, n_heads=18, **demo)}
    if device.startswith("cuda") and not quick:
        shapes["gpt2-small"] = get_preset("gpt2-small").shape
    if not device.startswith("cuda"):
        shapes = {"L2-H144": shapes["L2-H144"]}
    dtype = "bf16" if device.startswith("cuda") else "fp32"
    out = {}
    for label, shape in shapes.items():
        result = bench(shape, BenchConfig(device=device, dtype=dtype, prompt_lens=(64,), contexts=(64,), batches=(),
                                          repeat=3 if quick else 10))
        out[label] = {f"{p.kind} {p.variant}": {"measured_s": p.timing.median, "predicted_s": p.predicted_s,
                                                "ratio": p.ratio} for p in result.latency}
        out[label]["hardware"] = result.hardware["name"]
    return out


def section_ray(device: str, quick: bool) -> dict:
    import ray

    ray.init(num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        def where() -> dict:
            import torch as t

            return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "visible": t.cuda.device_count(),
                    "pid": os.getpid()}

        task = ray.remote(max_retries=0)(where).options(num_gpus=1, max_calls=1)  # as study.executors.ray does
        runs = ray.get([task.remote() for _ in range(2)])
    finally:
        ray.shutdown()
    return {"tasks": runs, "one_gpu_each": all(r["visible"] == 1 for r in runs),
            "fresh_process_each": len({r["pid"] for r in runs}) == len(runs)}


def skip_reason(name: str, device: str) -> str | None:
    if name in CUDA_ONLY and not device.startswith("cuda"):
        return CUDA_ONLY[name]
    if name == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            return "ray is not installed"
    return None


def run(sections: tuple[str, ...], *, device: str, quick: bool) -> dict:
    report = {"meta": {"torch": torch.__version__, "python": platform.python_version(), "device": device,
                       "device_name": torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda")
                       else platform.processor() or platform.machine(), "quick": quick,
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "sections": {}, "skipped": {}, "errors": {}, "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as folder:
        tmp = Path(folder)
        os.environ.setdefault("DEPTHWIDTH_CACHE", str(tmp / "cache"))  # no stale profile or token cache
        for name in sections:
            reason = skip_reason(name, device)
            if reason:
                report["skipped"][name] = reason
                continue
            fn = globals()[f"section_{name}"]
            start = time.perf_counter()
            try:
                args = (device, quick, tmp) if name in ("memory", "mfu", "resume") else (device, quick)
                report["sections"][name] = {**fn(*args), "expected": EXPECTED[name]}
            except Exception as exc:  # noqa: BLE001 -- a failing section is a result: the others still run
                report["errors"][name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                report["errors"][name + "_traceback"] = traceback.format_exc(limit=4)
            report["seconds"][name] = time.perf_counter() - start
            print(f"{name}: {'ok' if name in report['sections'] else 'ERROR ' + report['errors'][name]} "
                  f"({report['seconds'][name]:.1f} s)", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="gpu_check.json", help="the JSON written (default gpu_check.json)")
    parser.add_argument("--quick", action="store_true", help="small sizes everywhere (a minute on a GPU, seconds on a CPU)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when available)")
    args = parser.parse_args(argv)
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; expected some of {', '.join(SECTIONS)}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {device} but torch {torch.__version__} sees no CUDA device")
    report = run(sections, device=device, quick=args.quick or not device.startswith("cuda"))
    Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wrote {args.out}: {len(report['sections'])} sections, skipped {sorted(report['skipped'])}, "
          f"errors {sorted(k for k in report['errors'] if not k.endswith('_traceback'))}")
    return 1 if any(not k.endswith("_traceback") for k in report["errors"]) else 0


if __name__ == "__main__":
    sys.exit(main())
