"""Checkpoints of a multi-process run, with torch.distributed.checkpoint (DCP).

Every `checkpoint_every` steps each rank writes its shards of the model and optimizer states (as
`get_state_dict` gives them: whole tensors under DDP, DTensor shards under FSDP2 and TP) into
`dcp/step-NNNNNNNNN/` of the run folder, with its own RNG state (`rng-<rank>.pt`); then rank 0 writes
the small `checkpoint.pt` (atomically, as a one-process run does) whose meta names that folder. A run
killed while writing DCP files still has the previous `checkpoint.pt` pointing at a complete folder.
Folders no checkpoint names any more are removed.

Resharding: DCP loads a checkpoint into whatever layout the resuming run has, so a run resumes with
another nproc or `parallel` (ddp <-> fsdp), same `tp`: the numbers continue, up to the order of float
sums. A different `tp` is refused: the fused QKV rows are stored in the tensor-parallel order of the
`tp` that wrote them (`parallelize.qkv_permutation`). The checkpoint written at the end of a run holds
whole tensors in the model's own order (rank 0 gathers them), like a one-process run's, so export and
every other reader of `checkpoint.pt` work unchanged; it can also be resumed with nproc = 1.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from depthwidth.errors import UserError
from depthwidth.artifact import checkpoint as ckpt
from depthwidth.artifact.folder import CHECKPOINT, CHECKPOINT_PREV, DCP_DIR
from depthwidth.artifact.state import TrainState

#: settings a run may change when it resumes (DCP reshards the states); tp may not (module docstring)
RESHARDABLE = ("nproc", "parallel", "reshard")


def _state(model, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    return {"model": msd, "optim": osd}


def save(state: TrainState, *, run_dir: Path, ctx, final: bool) -> None:
    """Write the run's checkpoint at `state.meta.step` (collective: every rank calls it); `ctx` is this
    rank's `DistContext`."""
    meta, step = state.meta.to_dict(), state.meta.step
    if final:
        from depthwidth.train.parallelize import full_state

        msd, osd = full_state(state.model, state.optimizer, ctx)
        if ctx.writer:
            _write_pointer(run_dir, {"model": msd, "optimizer": osd}, meta, device=state.device)
        ctx.barrier()
        if ctx.writer:
            _prune(run_dir, keep=())
        return
    import torch.distributed.checkpoint as dcp

    folder = run_dir / DCP_DIR / f"step-{step:09d}"
    if ctx.writer and folder.exists():
        shutil.rmtree(folder)
    ctx.barrier()
    with ctx.meter.paused() if ctx.meter is not None else _null():
        dcp.save(_state(state.model, state.optimizer), checkpoint_id=str(folder))
    torch.save(state.rng(), folder / f"rng-{ctx.rank}.pt")
    ctx.barrier()
    if ctx.writer:
        _write_pointer(run_dir, {"model": {}, "optimizer": {}}, {**meta, "dcp": folder.name, "dcp_tp": ctx.tp},
                       device=state.device)
        _prune(run_dir, keep=_named(run_dir))
    ctx.barrier()


def _null():
    import contextlib

    return contextlib.nullcontext()


def _write_pointer(run_dir: Path, states: dict, meta: dict, *, device) -> None:
    ckpt.write_checkpoint(run_dir / CHECKPOINT, model_state=states["model"], optimizer_state=states["optimizer"],
                          rng=ckpt.rng_state(device), meta=meta)


def _named(run_dir: Path) -> set[str]:
    names = set()
    for name in (CHECKPOINT, CHECKPOINT_PREV):
        try:
            names.add(ckpt.load_checkpoint(run_dir / name, device=torch.device("cpu"))["meta"].get("dcp"))
        except (UserError, OSError):
            continue
    return names


def _prune(run_dir: Path, *, keep) -> None:
    root = run_dir / DCP_DIR
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if folder.name not in keep:
            shutil.rmtree(folder, ignore_errors=True)
    if not any(root.iterdir()):
        root.rmdir()


def is_dcp(payload: dict) -> bool:
    return bool(payload["meta"].get("dcp"))


def load(state: TrainState, payload: dict, *, run_dir: Path, ctx=None) -> None:
    """Load the DCP folder `payload` names into the (wrapped) model and optimizer of `state`, and this rank's
    RNG; `ctx` is this rank's `DistContext` (None in a one-process run)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    meta = payload["meta"]
    tp = ctx.tp if ctx is not None else 1
    if meta.get("dcp_tp", 1) != tp:
        raise UserError(f"{run_dir} holds a checkpoint written with tp={meta.get('dcp_tp')}; resume it with "
                        f"--tp {meta.get('dcp_tp')} (the QKV rows are stored in that tensor-parallel order)")
    folder = run_dir / DCP_DIR / meta["dcp"]
    if not folder.is_dir():
        raise UserError(f"{run_dir}: checkpoint.pt names {folder}, which is missing")
    states = _state(state.model, state.optimizer)
    dcp.load(states, checkpoint_id=str(folder))
    set_state_dict(state.model, state.optimizer, model_state_dict=states["model"], optim_state_dict=states["optim"])
    rank = ctx.rank if ctx is not None else 0
    mine = folder / f"rng-{rank}.pt"
    rng = torch.load(mine if mine.is_file() else folder / "rng-0.pt", weights_only=True)
    ckpt.set_rng_state(rng, state.device)


def load_full(state: TrainState, payload: dict, *, ctx) -> None:
    """Load a one-process (whole-tensor) checkpoint into a multi-process run's model and optimizer."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    from depthwidth.train.parallelize import inner, qkv_permutation

    msd = dict(payload["model"])
    fqn = {id(p): n for n, p in inner(state.model).named_parameters()}
    names = [fqn[id(p)] for g in state.optimizer.param_groups for p in g["params"]]  # torch's numbering
    osd = payload["optimizer"]
    state = {names[int(i)]: dict(v) for i, v in osd["state"].items()}
    groups = [{**g, "params": [names[int(i)] for i in g["params"]]} for g in osd["param_groups"]]
    if ctx.tp > 1:
        order = qkv_permutation(inner(state.model).shape, ctx.tp)
        for key in [k for k in msd if k.endswith(("attn.qkv.weight", "attn.qkv.bias"))]:
            msd[key] = msd[key][order]
            for name, value in list(state.get(key, {}).items()):
                if torch.is_tensor(value) and value.dim() >= 1 and value.shape[0] == len(order):
                    state[key][name] = value[order]
    set_state_dict(state.model, state.optimizer, model_state_dict=msd, optim_state_dict={"state": state,
                                                                                     "param_groups": groups},
                   options=StateDictOptions(full_state_dict=True))
    ckpt.set_rng_state(payload["rng"], state.device)


def load_any(state: TrainState, payload: dict, *, run_dir: Path, ctx=None) -> None:
    """A DCP checkpoint (`load`), or a whole-tensor one into a multi-process run (`load_full`)."""
    if is_dcp(payload):
        load(state, payload, run_dir=run_dir, ctx=ctx)
    else:
        load_full(state, payload, ctx=ctx)


__all__ = ["DCP_DIR", "RESHARDABLE", "is_dcp", "load", "load_any", "load_full", "save"]
