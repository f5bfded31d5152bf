"""`train(shape, config)`: one fair, reproducible, resumable training run.

Fairness: batches come from `depthwidth.data.BatchStream`, a pure function of the data settings,
the seed and the step, never of the model; `batch_stream_hash` records them. Reproducibility:
the model is initialised after torch.manual_seed(seed), the thread count is fixed, deterministic
algorithms are requested on CPU, and a checkpoint carries the RNG state, so on CPU a resumed run
reproduces the uninterrupted run's losses, learning rates and gradient norms bit for bit (the
timing fields of the curve are measurements and differ).

Bad input (unknown corpus, empty file, corpus smaller than one batch, seq_len beyond the shape's
max_seq_len, a vocabulary smaller than the tokenizer's, fp16 on CPU, a folder holding another run)
raises ValueError/FileNotFoundError before anything is written. A run that diverges (NaN/inf loss,
or loss above diverge_factor * ln(vocab)) returns status "diverged"; a runtime error inside the
loop (e.g. out of memory) returns status "failed" - neither raises, so a study carries on.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from depthwidth.data.batches import BatchStream
from depthwidth.data.dataset import Dataset, load_dataset
from depthwidth.machine import cache_dir as machine_cache_dir, peak_flops
from depthwidth.shapes.params import count_params
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.schedule import lr_at
from depthwidth.artifact import checkpoint as ckpt
from depthwidth.artifact.folder import CHECKPOINT, ERROR, RESULT
from depthwidth.artifact.model import build_model
from depthwidth.artifact.records import CheckpointMeta, CurvePoint, EvalPoint
from depthwidth.artifact.state import TrainState, save_state
from depthwidth.files import write_json
from depthwidth.train import dist_checkpoint
from depthwidth.train.distributed import check_parallel, join, under_launcher
from depthwidth.train.evaluate import evaluate
from depthwidth.train.horizons import branches, check_horizons, save_branches, with_horizons
from depthwidth.train.init_from import check_resumed_init, read_init
from depthwidth.train.measure import SavedTensorMeter, state_bytes
from depthwidth.train.run_result import FINAL_KEY, final_record, run_result, stored_final
from depthwidth.train.probe_eval import probe_scores
from depthwidth.train.optim import make_optimizer
from depthwidth.artifact.result import TrainProgress, TrainResult
from depthwidth.train.run_dir import check_resumable, prepare_run_dir, stored_result
from depthwidth.train.setup import check_compatible, execution_settings, resolve_device
from depthwidth.train import speed


def train(
    shape: Shape,
    config: TrainConfig,
    *,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: Callable[[TrainProgress], None] | None = None,
    dataset: Dataset | None = None,
) -> TrainResult:
    """Train `shape` under `config`; see the module docstring. With `out_dir`, checkpoints and the
    result are written there and `resume=True` continues (or returns) the run found there."""
    speed.prepare_deterministic(config)  # CUDA: before anything starts cuBLAS
    device = resolve_device(config)
    cache_dir = machine_cache_dir(config.cache_dir)
    if dataset is None:
        dataset = load_dataset(corpus=config.corpus, tokenizer=config.tokenizer, val_fraction=config.val_fraction,
                               test_fraction=config.test_fraction, cache_dir=cache_dir)
    check_compatible(shape, config, dataset, device)
    check_parallel(config, shape)
    check_horizons(config)
    if config.nproc > 1 and not under_launcher():  # start the run's processes (train/launch.py); rank 0's result
        from depthwidth.train.launch import spawn  # (its ranks run train/rank.py, which imports this module)

        return spawn(shape, config, out_dir=out_dir, resume=resume)
    init = read_init(config, shape, tokenizer_fingerprint=dataset.tokenizer.fingerprint)
    stream = BatchStream(dataset, seq_len=config.seq_len, batch_size=config.batch_size, seed=config.seed)
    eval_slices = stream.eval_slices(config.eval_windows)
    run_dir = Path(out_dir) if out_dir is not None else None
    payload, resumes = None, []
    if run_dir is not None:
        done = stored_result(run_dir, shape=shape, config=config, dataset=dataset, resume=resume)
        if done is not None:
            return done
        payload, resumes = check_resumable(run_dir, shape=shape, config=config, dataset=dataset, resume=resume,
                                           device=device)
        check_resumed_init(run_dir, payload, init)
    ctx = join(config, device)  # this rank of a multi-process run (train/distributed.py), else None
    device = ctx.device if ctx is not None else device
    if run_dir is not None:
        if ctx is not None:
            ctx.barrier()  # every rank has read the folder before rank 0 writes to it
        if ctx is None or ctx.writer:
            prepare_run_dir(run_dir, shape=shape, config=config, dataset=dataset)
    scratch = tempfile.TemporaryDirectory(prefix="dw-horizons-") if config.horizons and run_dir is None else None
    branch_root = run_dir if scratch is None else Path(scratch.name)  # where the cooldown branches live
    try:
        try:
            with execution_settings(config, device) as threads, speed.device_settings(config, device):
                result = _Run(shape, config, dataset=dataset, stream=stream, eval_slices=eval_slices, device=device,
                              threads=threads, cache_dir=cache_dir, run_dir=run_dir, progress=progress,
                              init=init, dist=ctx, branch_root=branch_root).run(payload, resumes)
        finally:
            if ctx is not None:
                ctx.close()
        if config.horizons and result.completed:
            result = with_horizons(train, shape, config, result, root=branch_root, dataset=dataset,
                                   progress=progress)
            if run_dir is not None:
                write_json(run_dir / RESULT, result.to_dict())
        return result
    finally:
        if scratch is not None:
            scratch.cleanup()


class _Run:
    def __init__(self, shape, config, *, dataset, stream, eval_slices, device, threads, cache_dir, run_dir, progress,
                 init=None, dist=None, branch_root=None):
        self.shape, self.config, self.dataset, self.stream, self.init = shape, config, dataset, stream, init
        self.dist = dist  # DistContext of a multi-process run
        self.eval_slices, self.device, self.threads = eval_slices, device, threads
        self.cache_dir, self.run_dir, self.progress = cache_dir, run_dir, progress
        self.steps = config.total_steps
        self.dtype = speed.run_dtype(config, device)  # what it trains in (CUDA: bf16 by default), recorded
        self.autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if self.dtype == "bf16"
                         else contextlib.nullcontext())
        self.curve: list[dict] = []
        self.evals: list[dict] = []
        self.train_seconds = self.eval_seconds = 0.0
        self.saved_bytes = self.states = None
        self.peak = None  # PeakFlops, once measured
        self.n_params = count_params(shape).total  # replaced by the module's own count once built
        self.hasher = stream.hasher()
        self.max_loss = config.diverge_factor * math.log(dataset.vocab_size)
        self.compiled = speed.compiles(config, device)  # "auto" on CPU: decided in _build
        self.compile_auto: dict | None = None  # the "auto" decision (train/compile_auto.py)
        self.feeder = speed.BatchFeeder(stream, device, self.steps)
        self.start = 0  # the first step this process runs (its first WARMUP_STEPS are warm-up)
        self.resumes: list[str] = []  # where and why this run continued (see run_dir.check_resumable)
        self.branches = branches(config)  # {step: [(horizon, its config)]}: cooldowns that branch off there
        self.branch_root = branch_root
        self.state: TrainState | None = None  # model, optimizer, device and meta: built by _build
        self.model = self.forward = None  # state.model as the loop uses it; the (compiled) training forward
        self.params: list[torch.nn.Parameter] = []

    # ---- setup --------------------------------------------------------------------------------
    def _build(self, payload) -> int:
        torch.manual_seed(self.config.seed)
        model = build_model(self.shape, self.config)  # the builder every reader of the run uses too
        model.to(self.device).train()
        self.n_params = sum(p.numel() for p in model.parameters())
        expected = count_params(self.shape).total
        if self.n_params != expected:
            raise RuntimeError(f"module has {self.n_params} parameters but count_params says {expected}")
        if payload is None and self.init is not None:  # start from the init_from folder's weights
            model.load_state_dict(self.init.state)
        if self.dist is not None:  # DDP, FSDP2, tensor parallel (train/parallelize.py)
            model = self.dist.wrap(model, self.config)
        optimizer = make_optimizer(getattr(model, "module", model), self.config)
        if self.dist is not None:
            self.dist.adapt(optimizer)
        self.state = TrainState(model=model, optimizer=optimizer, device=self.device, meta=self._meta(0))
        self.model, self.optimizer = model, optimizer
        self.params = [p for g in optimizer.param_groups for p in g["params"]]
        left = self.steps - (int(payload["meta"]["step"]) if payload is not None else 0)  # "auto" judges these
        self.compiled, self.compile_auto = speed.resolve_compile(self.config, self.device, self.shape, steps=left,
                                                                 dtype=self.dtype, threads=self.threads,
                                                                 cache=self.cache_dir)
        self.forward = speed.compile_model(model) if self.compiled else model  # the training forward
        self.hasher = self.stream.hasher()
        if payload is None:
            return 0
        if self.dist is not None or dist_checkpoint.is_dcp(payload):
            dist_checkpoint.load_any(self.state, payload, run_dir=self.run_dir, ctx=self.dist)
        else:
            self.state.restore(payload)
        meta = payload["meta"]
        self.curve, self.evals = meta["curve"], meta["evals"]
        self.train_seconds, self.eval_seconds = meta["train_seconds"], meta["eval_seconds"]
        self.saved_bytes, self.states = meta.get("saved_activation_bytes"), meta.get("state_bytes")
        for step in range(meta["step"]):  # positions are pure: re-hash the steps already done
            self.hasher.update(self.stream.positions(step))
        return int(meta["step"])

    # ---- one optimizer step -------------------------------------------------------------------
    def _step(self, step: int, meter: SavedTensorMeter | None):
        cfg = self.config
        lr = lr_at(cfg, step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)  # the parametrization's factor (1 under SP)
        x, y = self._batch(step)  # (B, T) each
        mb, accum = cfg.micro_batch_size, cfg.accumulation
        if self.dist is not None:  # this rank's slice of the global batch
            x, y, mb = self.dist.shard_batch(x, y, mb)
        total = None
        for m in range(accum):
            track = meter.track() if meter is not None and m == 0 else contextlib.nullcontext()
            sync = self.dist.sync(self.model, last=m == accum - 1) if self.dist else contextlib.nullcontext()
            with sync:
                with track, self.autocast:
                    _, loss = self.forward(x[m * mb : (m + 1) * mb], y[m * mb : (m + 1) * mb])
                (loss / accum if accum > 1 else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        max_norm = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
        grad_norm = (self.dist.clip_grad_norm(self.params, max_norm) if self.dist is not None
                     else torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True))
        self.optimizer.step()
        if meter is not None:
            self.states = state_bytes(self.model, self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        loss = total / accum if accum > 1 else total
        return (self.dist.mean(loss) if self.dist is not None else loss), grad_norm, lr

    def _batch(self, step: int):
        """The step's inputs and targets on the device (prefetched on CUDA); its positions are hashed."""
        positions, x, y = self.feeder.get(step)
        self.hasher.update(positions)
        return x, y

    # ---- the loop -------------------------------------------------------------------------------
    def run(self, payload, resumes: list[str]) -> TrainResult:
        self.resumes = resumes
        try:
            return self._run(payload)
        except (RuntimeError, MemoryError) as exc:  # out of memory, a kernel failure: report, do not kill a study
            return self._finish("failed", error=f"{type(exc).__name__}: {exc}".strip().splitlines()[0])

    def _run(self, payload) -> TrainResult:
        tf32 = self.device.type == "cuda" and self.dtype == "fp32"  # speed.device_settings turned it on
        self.peak = peak_flops(dtype="tf32" if tf32 else self.dtype, device=self.device, threads=self.threads,
                               cache_dir=self.cache_dir, override=self.config.peak_flops)  # its GEMM: not the run's
        start = self.start = self._build(payload)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
        flush_every = speed.flush_every(self.device)
        tokens_per_step = self.config.tokens_per_step
        pending: list[tuple] = []
        t_group = (time.perf_counter(), time.process_time())
        for step in range(start, self.steps):
            meter = SavedTensorMeter(self.model.parameters()) if self.saved_bytes is None else None
            with self.dist.metered() if self.dist is not None else contextlib.nullcontext():
                loss, grad_norm, lr = self._step(step, meter)
            if meter is not None:
                self.saved_bytes = meter.peak_bytes
            pending.append((step, loss, grad_norm, lr))
            last = step == self.steps - 1
            do_eval = self.config.eval_every and (step + 1) % self.config.eval_every == 0 and not last
            do_ckpt = (self.run_dir is not None and self.config.checkpoint_every
                       and (step + 1) % self.config.checkpoint_every == 0 and not last)
            do_branch = step + 1 in self.branches
            warm = step - start < speed.WARMUP_STEPS  # timed alone, left out of tokens/s
            if len(pending) >= flush_every or warm or last or do_eval or do_ckpt or do_branch:
                diverged_at = self._flush(pending, t_group, tokens_per_step)
                pending = []
                if diverged_at is not None:
                    return self._finish("diverged", diverged_at=diverged_at)
                if do_eval:
                    self._eval(step + 1, full=False)
                if do_branch:  # before the run's own checkpoint: a kill between the two re-saves the branch
                    self._branch(step + 1)
                if do_ckpt:
                    self._save(step + 1)
                t_group = (time.perf_counter(), time.process_time())
        if start == self.steps and self.evals and self.evals[-1]["step"] == self.steps:
            outcome, probes = self._recorded_final(payload)  # resumed from the final checkpoint
        else:
            outcome = self._eval(self.steps, full=True)
            probes = self._probes()
            if self.run_dir is not None:
                self._save(self.steps, final=final_record(outcome, probes))
        return self._finish("completed", outcome=outcome, probes=probes)

    def _recorded_final(self, payload):
        """(outcome, probes) of a run resumed from its final checkpoint, whose evaluation is recorded there:
        read back, never recorded twice. A checkpoint without the record (an older one, or a multi-process
        run's) is evaluated again, the evaluation points and seconds left as they were recorded."""
        stored = stored_final(payload["meta"])
        if stored is not None:
            return stored
        return self._evaluate(), self._probes(record=False)

    def _probes(self, *, record: bool = True) -> dict[str, dict[str, float]]:
        """Accuracy on the held-out test examples of every probe slice, by difficulty (train/probe_eval.py)."""
        if not any(s.kind == "probe" for s in self.dataset.slices):
            return {}
        t0 = time.perf_counter()
        out = probe_scores(self.model, slices=self.dataset.slices, dense=self.stream.dense,
                           tokenizer=self.dataset.tokenizer, seq_len=self.config.seq_len, device=self.device,
                           batch_size=self.config.micro_batch_size, autocast=self.autocast)
        if record:
            self.eval_seconds += time.perf_counter() - t0
        return out

    def _flush(self, pending, t_group: tuple[float, float], tokens_per_step: int) -> int | None:
        if len(pending) == 1:
            values = [[pending[0][1].item(), pending[0][2].item()]]
        else:
            values = torch.stack([torch.stack([p[1].float(), p[2].float()]) for p in pending]).tolist()  # syncs
        seconds = (time.perf_counter() - t_group[0]) / len(pending)
        cpu_seconds = (time.process_time() - t_group[1]) / len(pending)
        self.train_seconds += seconds * len(pending)
        diverged = None
        for (step, _, _, lr), (loss, grad_norm) in zip(pending, values):
            self.curve.append(CurvePoint(step=step, loss=loss, lr=lr, grad_norm=grad_norm, seconds=seconds,
                                         cpu_seconds=cpu_seconds, tokens_per_s=tokens_per_step / seconds,
                                         warmup=step - self.start < speed.WARMUP_STEPS).to_dict())
            if diverged is None and not (math.isfinite(loss) and loss <= self.max_loss):
                diverged = step
        if self.progress is not None:
            done = pending[-1][0] + 1
            self.progress(TrainProgress(phase="train", step=done, steps=self.steps, loss=values[-1][0],
                                        tokens_per_s=tokens_per_step / seconds,
                                        eta_s=(self.steps - done) * self._mean_step_seconds()))
        return diverged

    def _mean_step_seconds(self) -> float:
        recent = self.curve[-50:]
        return sum(c["seconds"] for c in recent) / len(recent)

    def _evaluate(self):
        return evaluate(self.model, tokens=self.dataset.val, slices=self.eval_slices, seq_len=self.config.seq_len,
                        batch_size=self.config.micro_batch_size, device=self.device, autocast=self.autocast)

    def _eval(self, step: int, *, full: bool):
        t0 = time.perf_counter()
        out = self._evaluate()
        self.eval_seconds += time.perf_counter() - t0
        self.evals.append(EvalPoint(step=step, tokens=step * self.config.tokens_per_step, val_loss=out.loss,
                                    val_loss_by_slice=out.by_slice).to_dict())
        if self.progress is not None:
            self.progress(TrainProgress(phase="eval", step=step, steps=self.steps, loss=None, tokens_per_s=None,
                                        eta_s=None, val_loss=out.loss))
        return out

    def _meta(self, step: int) -> CheckpointMeta:
        return CheckpointMeta(step=step, curve=self.curve, evals=self.evals, train_seconds=self.train_seconds,
                              eval_seconds=self.eval_seconds, saved_activation_bytes=self.saved_bytes,
                              state_bytes=self.states, config=self.config.to_dict(), shape=self.shape.to_dict(),
                              dataset_hash=self.dataset.dataset_hash,
                              init_sha256=self.init.sha256 if self.init is not None else None,
                              resumes=list(self.resumes))

    def _save(self, step: int, *, final: dict | None = None) -> None:
        """The run's checkpoint after `step` steps; the last one (`final`: `final_record`) also keeps what the
        final evaluation measured, so that a run resumed from it finishes without evaluating again."""
        self.state.meta = self._meta(step)
        if self.dist is not None:  # DCP shards, or whole tensors at the end (train/dist_checkpoint.py)
            return dist_checkpoint.save(self.state, run_dir=self.run_dir, ctx=self.dist, final=step == self.steps)
        if final is None:
            save_state(self.run_dir, self.state)
        else:
            ckpt.save_checkpoint(self.run_dir / CHECKPOINT, model=self.model, optimizer=self.optimizer,
                                 device=self.device, meta=self.state.meta.to_dict() | {FINAL_KEY: final})

    def _branch(self, step: int) -> None:
        save_branches(self.branches[step], root=self.branch_root, step=step, total=self.steps, shape=self.shape,
                      dataset=self.dataset, meta=self._meta(step), model=self.model, optimizer=self.optimizer,
                      device=self.device)

    def _finish(self, status: str, *, outcome=None, diverged_at=None, error=None, probes=None) -> TrainResult:
        if status == "completed":
            speed.record_compile(self)
        result = run_result(self, status, outcome=outcome, diverged_at=diverged_at, error=error, probes=probes)
        if self.progress is not None:
            self.progress(TrainProgress(phase="done", step=len(self.curve), steps=self.steps, loss=None,
                                        tokens_per_s=result.tokens_per_s, eta_s=0.0, val_loss=result.val_loss))
        deferred = status == "completed" and bool(self.config.horizons)  # written once the branches are done
        if self.run_dir is not None and (self.dist is None or self.dist.writer) and not deferred:
            write_json(self.run_dir / (ERROR if status == "failed" else RESULT), result.to_dict())
        return result

