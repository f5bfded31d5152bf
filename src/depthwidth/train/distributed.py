"""One run over several processes: the process group, the device mesh and what each rank computes.

A run with `nproc > 1` (or started by `torchrun`, which sets RANK, WORLD_SIZE and LOCAL_RANK) joins a
torch.distributed process group (`gloo` on CPU, `nccl` on CUDA) with a device mesh of shape
(dp, tp): `dp = nproc / tp` data-parallel replicas (or FSDP2 shards), each of `tp` tensor-parallel
ranks. Rank r sits at mesh position (r // tp, r % tp).

The batch: every rank builds the same global batch (a pure function of data, seq_len, batch, seed and
step, so `batch_stream_hash` does not depend on N); data-parallel rank d takes, of each of the
`accumulation` micro-batches of `micro_batch` sequences, the d-th of dp equal slices. DDP and FSDP2
average gradients over dp, so the optimizer sees the gradient of the same global batch as one process.
Tensor-parallel ranks of one replica take the same slice. Only rank 0 writes files.
"""

from __future__ import annotations

import datetime
import math
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from depthwidth.errors import UserError
from depthwidth.machine.paths import env_seconds
from depthwidth.artifact.config import TrainConfig

#: environment variables a launcher (torchrun, or `launch.spawn`) sets for each rank
LAUNCH_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
#: Seconds a collective may wait for the other ranks before the run fails (default 600).
TIMEOUT_ENV = "DEPTHWIDTH_DIST_TIMEOUT"


def collective_timeout() -> datetime.timedelta:
    """$DEPTHWIDTH_DIST_TIMEOUT seconds (default 600), checked: a bad value is one line, not a traceback."""
    return datetime.timedelta(seconds=env_seconds(TIMEOUT_ENV, 600.0, most=7 * 86400))


def under_launcher() -> bool:
    """Whether this process is one rank of a launched group (torchrun, or our own spawn)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE")) and int(os.environ["WORLD_SIZE"]) > 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_parallel(config: TrainConfig, shape) -> None:
    """What a parallel layout needs of the batch and the shape; one UserError naming the field."""
    dp, tp = config.nproc // config.tp, config.tp
    if config.micro_batch_size % dp:
        raise UserError(f"micro_batch={config.micro_batch_size} (batch_size without accumulation) must be a multiple "
                        f"of the {dp} data-parallel ranks (nproc / tp)")
    if tp > 1:
        for name, size in (("n_heads", shape.n_heads), ("n_kv_heads", shape.n_kv_heads), ("d_ff", shape.d_ff)):
            if size % tp:
                raise UserError(f"tp={tp} must divide the shape's {name}={size} (tensor parallelism splits heads "
                                "and the MLP's hidden units)")
        if config.parallel == "ddp" and dp > 1:
            raise UserError(f"tp={tp} with nproc={config.nproc} needs parallel='fsdp' (FSDP2 over the data-parallel "
                            "dimension of the 2-D mesh); DDP does not take tensor-parallel parameters")


@dataclass
class DistContext:
    """Where this process sits in the run's process group (see the module docstring)."""

    rank: int
    world: int
    tp: int
    parallel: str
    device: torch.device
    mesh: Any = None  # DeviceMesh (dp, tp), or (dp,) when tp == 1
    owns_group: bool = False  # this call created the process group
    meter: Any = None  # CommMeter of the run, set by the trainer
    extras: dict = field(default_factory=dict)

    @property
    def dp(self) -> int:
        return self.world // self.tp

    @property
    def dp_rank(self) -> int:
        return self.rank // self.tp

    @property
    def tp_rank(self) -> int:
        return self.rank % self.tp

    @property
    def writer(self) -> bool:
        """Only rank 0 writes the run folder and returns the result that counts."""
        return self.rank == 0

    @property
    def dp_mesh(self):
        return self.mesh["dp"] if self.tp > 1 else self.mesh

    @property
    def tp_mesh(self):
        return self.mesh["tp"] if self.tp > 1 else None

    # ---- hooks of the trainer (train/loop.py) --------------------------------------------------
    def wrap(self, model, config: TrainConfig):
        """The model as this rank trains it (DDP, FSDP2, TP: `parallelize.wrap`), with the step meter."""
        from depthwidth.train.comm_meter import CommMeter
        from depthwidth.train.parallelize import wrap

        self.meter = CommMeter()
        return wrap(model, self, reshard=config.reshard)

    def adapt(self, optimizer) -> None:
        """Tensor parallel: AdamW's per-tensor path, as a group mixes DTensor shards (projections) and plain
        replicated tensors (norms, embeddings), which one foreach kernel cannot take. The numbers are the
        same; the whole-tensor checkpoint at the end records the group's own setting (`foreach_was`)."""
        if self.tp > 1:
            for group in optimizer.param_groups:
                self.extras.setdefault("foreach_was", []).append(group.get("foreach"))
                group["foreach"] = False

    def sync(self, model, *, last: bool):
        """DDP: all-reduce gradients only in the last micro-batch's backward (`no_sync` before it)."""
        import contextlib

        return contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync()

    def metered(self):
        """Meter the communication of one optimizer step."""
        return self.meter.step()

    # ---- the batch -------------------------------------------------------------------------
    def shard_batch(self, x: torch.Tensor, y: torch.Tensor, micro: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(x, y, micro) of this rank: of each micro-batch of `micro` rows, the dp_rank-th of dp slices."""
        dp = self.dp
        if dp == 1:
            return x, y, micro
        local = micro // dp
        rows = torch.arange(x.shape[0]).view(-1, dp, local)[:, self.dp_rank].reshape(-1)
        return x[rows.to(x.device)], y[rows.to(y.device)], local

    # ---- reductions of bookkeeping scalars (not counted as model communication) ---------------
    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean over data-parallel ranks of a scalar that tensor-parallel ranks share."""
        out = value.detach().clone().reshape(1).float()
        with self._unmetered():
            dist.all_reduce(out)
        return (out / self.world).reshape(())

    def clip_grad_norm(self, params: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
        """Global gradient norm over all ranks, clipped as torch.nn.utils.clip_grad_norm_ does.
        DDP's gradients are whole and equal on every rank (torch's own function); FSDP2/TP gradients are
        DTensor shards: each rank's sum of squares, divided by how many ranks hold a replica of it, summed
        over the world."""
        from torch.distributed.tensor import DTensor, Replicate

        if self.parallel == "ddp" and self.tp == 1:
            return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
        grads = [p.grad for p in params if p.grad is not None]
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        locals_ = []
        for g in grads:
            if isinstance(g, DTensor):
                copies = math.prod(g.device_mesh.size(i) for i, pl in enumerate(g.placements) if isinstance(pl, Replicate))
                copies *= self.world // g.device_mesh.size()
                local = g.to_local()
            else:
                copies, local = self.world, g
            locals_.append(local)
            total += local.detach().double().pow(2).sum() / copies
        with self._unmetered():
            dist.all_reduce(total)
        norm = total.sqrt().float()
        coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
        torch._foreach_mul_(locals_, coef)
        return norm

    def barrier(self) -> None:
        with self._unmetered():
            dist.barrier()

    def broadcast_object(self, obj):
        box = [obj]
        with self._unmetered():
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def _unmetered(self):
        import contextlib

        return self.meter.paused() if self.meter is not None else contextlib.nullcontext()

    def close(self) -> None:
        """The group stays open for the next run of this process (tearing it down on one rank while
        another reuses it would hang both); the process that started it ends it (`launch._child`)."""
        if self.meter is not None:
            self.meter.steps.clear()


def join(config: TrainConfig, device: torch.device) -> DistContext | None:
    """The run's `DistContext`, joining (or reusing) the process group; None for a one-process run."""
    if config.nproc == 1 and not under_launcher():
        return None
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != config.nproc:
        raise UserError(f"nproc={config.nproc} but this process is one of WORLD_SIZE={world} launched ones; "
                        f"start it with --nproc {world} (or torchrun --nproc-per-node {config.nproc})")
    rank = int(os.environ["RANK"])
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank))
        device = torch.device("cuda", local % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
    owns = not dist.is_initialized()
    if owns:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world,
                                timeout=collective_timeout())
    elif dist.get_world_size() != world:
        raise RuntimeError(f"a process group of {dist.get_world_size()} ranks is open; this run needs {world}")
    from torch.distributed.device_mesh import init_device_mesh

    dp, tp = world // config.tp, config.tp
    mesh = (init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp")) if tp > 1
            else init_device_mesh(device.type, (dp,), mesh_dim_names=("dp",)))
    return DistContext(rank=rank, world=world, tp=tp, parallel=config.parallel, device=device, mesh=mesh,
                       owns_group=owns)


__all__ = ["DistContext", "LAUNCH_ENV", "check_parallel", "free_port", "join", "under_launcher"]
