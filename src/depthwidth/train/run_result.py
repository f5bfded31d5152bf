"""The `TrainResult` of a run that ended (completed, diverged or failed): what it measured, from the loop's
state (`train.loop._Run`): losses, tokens/s over the timed steps, MFU against the measured and the vendor
peak, memory, counts, hashes, the settings it ran with and, for several processes, communication."""

from __future__ import annotations

import torch

from depthwidth.artifact.result import TrainResult
from depthwidth.shapes.flops import flops
from depthwidth.shapes.params import count_params
from depthwidth.train import speed
from depthwidth.train.comm_meter import comm_fields
from depthwidth.train.evaluate import EvalOutcome, position_buckets
from depthwidth.train.measure import peak_rss_bytes


#: the key of a final checkpoint's meta holding what the run's last evaluation and its probes measured
FINAL_KEY = "final"


def final_record(outcome: EvalOutcome, probes: dict) -> dict:
    """What the final evaluation measured beyond its `EvalPoint` (the loss by position, the probes), kept in
    the final checkpoint so that a run resumed there finishes without evaluating again."""
    return {"loss": outcome.loss, "by_slice": dict(outcome.by_slice), "by_position": list(outcome.by_position),
            "windows": outcome.windows, "tokens": outcome.tokens, "probes": probes}


def stored_final(meta: dict) -> tuple[EvalOutcome, dict] | None:
    """(outcome, probe accuracy) of a final checkpoint's `final_record`; None when it holds none (a
    checkpoint written before the record was kept, or a multi-process run's)."""
    record = meta.get(FINAL_KEY)
    if not isinstance(record, dict):
        return None
    try:
        outcome = EvalOutcome(loss=record["loss"], by_slice=dict(record["by_slice"]),
                              by_position=list(record["by_position"]), windows=int(record["windows"]),
                              tokens=int(record["tokens"]))
        return outcome, dict(record.get("probes") or {})
    except (KeyError, TypeError, ValueError):
        return None


def run_result(run, status: str, *, outcome=None, diverged_at=None, error=None, probes=None) -> TrainResult:
    cfg = run.config
    buckets = position_buckets(cfg.seq_len)
    timed = speed.timed_curve(run.curve)
    seconds = sum(c["seconds"] for c in timed)
    tokens_per_s = len(timed) * cfg.tokens_per_step / seconds if timed and seconds > 0 else None
    per_token = flops(run.shape, seq_len=cfg.seq_len).train_per_token
    achieved = per_token * tokens_per_s if tokens_per_s else None
    if run.device.type == "cuda":
        peak_memory = int(torch.cuda.max_memory_allocated(run.device))
    else:
        peak_memory = (run.states or 0) + (run.saved_bytes or 0) if run.states is not None else None
    counts = count_params(run.shape)
    vendor, vendor_source = speed.vendor_peak(run.device, run.dtype)
    result = TrainResult(
        status=status,
        val_loss=outcome.loss if outcome else None,
        val_loss_by_slice=outcome.by_slice if outcome else {s.name: None for s in run.eval_slices},
        val_loss_by_position=outcome.by_position if outcome else [None] * len(buckets),
        position_buckets=buckets,
        tokens_per_s=tokens_per_s,
        achieved_flops_per_s=achieved,
        mfu=achieved / run.peak.flops_per_s if achieved and run.peak else None,
        peak_flops=run.peak.flops_per_s if run.peak else None,
        peak_flops_source=run.peak.source if run.peak else "",
        peak_memory_bytes=peak_memory,
        saved_activation_bytes=run.saved_bytes,
        state_bytes=run.states,
        peak_rss_bytes=peak_rss_bytes(),
        params=run.n_params,
        non_embedding_params=counts.non_embedding,
        train_flops_per_token=per_token,
        train_seconds=run.train_seconds,
        eval_seconds=run.eval_seconds,
        steps=len(run.curve),
        tokens=len(run.curve) * cfg.tokens_per_step,
        curve=run.curve,
        evals=run.evals,
        batch_stream_hash=run.hasher.hexdigest(),
        corpus_hash=run.dataset.corpus_hash,
        dataset_hash=run.dataset.dataset_hash,
        config_hash=cfg.config_hash(),
        tokenizer=run.dataset.tokenizer.spec,
        vocab_size=run.dataset.vocab_size,
        diverged_at_step=diverged_at,
        error=error,
        device=str(run.device),
        dtype=run.dtype,
        threads=run.threads,
        torch_version=torch.__version__,
        shape=run.shape.to_dict(),
        config=cfg.to_dict(),
        dataset=run.dataset.to_dict(),
        probe_accuracy=probes or {},
        resumes=run.resumes,
        mfu_vendor=achieved / vendor if achieved and vendor else None,
        vendor_peak_flops=vendor,
        vendor_peak_source=vendor_source,
        compiled=run.compiled,
        compile_auto=run.compile_auto,
        tf32=run.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32,
        **(comm_fields(ctx=run.dist, shape=run.shape, config=cfg, device=run.device, curve=run.curve)
           if run.dist is not None else {}),
    )
    return result
