"""How the processes of one run share the model: DDP, FSDP2 `fully_shard`, DTensor tensor parallelism.

- `ddp`: `DistributedDataParallel` (buffers are not broadcast: the RoPE tables are the same everywhere);
  gradients are all-reduced (averaged) in buckets during backward, once per optimizer step (`no_sync`
  for the earlier micro-batches).
- `fsdp`: FSDP2 `fully_shard` on every block, then on the whole model (embeddings, final norm, head),
  over the data-parallel mesh dimension. Each unit all-gathers its parameters before forward and
  (with `reshard`, the default) again before backward, and reduce-scatters (averages) its gradients.
- `tp > 1` (Megatron-LM, Shoeybi et al. 2019): `parallelize_module` with the QKV projection, MLP up and
  gate column-wise and the attention output and MLP down projection row-wise over the tp mesh dimension;
  each rank computes its n_heads / tp query heads and n_kv_heads / tp kv heads. Embeddings, norms and
  the head stay replicated. Forward: one all-reduce after each row-wise projection (2 per layer);
  backward: one all-reduce of the input gradient of each column-wise module (QKV, up, and gate for
  SwiGLU). With nproc > tp, FSDP2 shards the tp-sharded parameters over dp (a 2-D mesh).
  The fused QKV weight's rows are reordered so that the contiguous tp-th block of rank r holds
  [q_r | k_r | v_r] (`qkv_permutation`); the weights written at the end of a run are put back in the
  model's own order, intermediate (DCP) checkpoints keep the tp layout.
Not built: sequence parallelism (norms and dropout sharded over the sequence).

`ctx` is always this rank's `depthwidth.train.distributed.DistContext`, which calls this module (never the
other way round).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from depthwidth.model.transformer import Attention, Transformer


def qkv_permutation(shape, tp: int) -> torch.Tensor:
    """Row order of the fused QKV weight for tp ranks: rank r's contiguous block is [q_r | k_r | v_r]."""
    q, kv = shape.q_dim, shape.kv_dim
    qs, ks = q // tp, kv // tp
    order = []
    for r in range(tp):
        order += [*range(r * qs, (r + 1) * qs), *range(q + r * ks, q + (r + 1) * ks),
                  *range(q + kv + r * ks, q + kv + (r + 1) * ks)]
    return torch.tensor(order)


class TPAttention(Attention):
    """`Attention` on this rank's heads: the QKV output is its local [q_r | k_r | v_r] block."""

    def forward(self, x, *, rope, cache=None, layer: int = 0):
        if cache is not None:
            raise NotImplementedError("KV-cache generation is not tensor-parallel; generate with a 1-process model")
        s, tp = self.shape, self.tp
        B, T, _ = x.shape
        hq, hk = s.n_heads // tp, s.n_kv_heads // tp
        q, k, v = self.qkv(x).split([hq * s.head_dim, hk * s.head_dim, hk * s.head_dim], dim=-1)
        q = q.view(B, T, hq, s.head_dim).transpose(1, 2)
        k = k.view(B, T, hk, s.head_dim).transpose(1, 2)
        v = v.view(B, T, hk, s.head_dim).transpose(1, 2)
        if rope is not None:
            from depthwidth.model.transformer import apply_rope

            q, k = apply_rope(q, rope[0][:T], rope[1][:T]), apply_rope(k, rope[0][:T], rope[1][:T])
        y = self._attend(q, k, v, start=0).transpose(1, 2).reshape(B, T, hq * s.head_dim)
        return F.dropout(self.out(y), p=self.dropout, training=self.training)


def wrap(model: Transformer, ctx: DistContext, *, reshard: bool = True) -> nn.Module:
    """The model as this rank trains it (see the module docstring); parameters already initialised and
    equal on every rank."""
    if ctx.tp > 1:
        _tensor_parallel(model, ctx)
    if ctx.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block, mesh=ctx.dp_mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=ctx.dp_mesh, reshard_after_forward=reshard)
        return model
    if ctx.dp > 1:
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids, forward_sync_buffers=False)
    return model


def _tensor_parallel(model: Transformer, ctx: DistContext) -> None:
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    order = qkv_permutation(model.shape, ctx.tp)
    plan = {}
    for i, block in enumerate(model.blocks):
        with torch.no_grad():
            block.attn.qkv.weight.copy_(block.attn.qkv.weight[order])
            if block.attn.qkv.bias is not None:
                block.attn.qkv.bias.copy_(block.attn.qkv.bias[order])
        block.attn.__class__ = TPAttention
        block.attn.tp = ctx.tp
        plan[f"blocks.{i}.attn.qkv"] = ColwiseParallel()
        plan[f"blocks.{i}.attn.out"] = RowwiseParallel()
        plan[f"blocks.{i}.mlp.up"] = ColwiseParallel()
        if block.mlp.gate is not None:
            plan[f"blocks.{i}.mlp.gate"] = ColwiseParallel()
        plan[f"blocks.{i}.mlp.down"] = RowwiseParallel()
    parallelize_module(model, ctx.tp_mesh, plan, src_data_rank=None)  # every rank holds the same init


def inner(model: nn.Module) -> nn.Module:
    """The Transformer inside a DDP wrapper (FSDP2 and TP change the module in place)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer, ctx: DistContext) -> tuple[dict, dict]:
    """(model state, optimizer state) as a 1-process run of the same shape would hold them (whole tensors
    on the CPU, QKV rows in the model's own order, the optimizer state keyed as `optimizer.state_dict()`
    of an unwrapped model); collective: every rank calls it, rank 0's copy is complete."""
    from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                         get_optimizer_state_dict)

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    msd = get_model_state_dict(model, options=opts)
    osd = get_optimizer_state_dict(model, optimizer, options=opts)
    if not ctx.writer:  # with cpu_offload only rank 0 receives the whole tensors
        return {}, {}
    names = list(msd)
    if ctx.tp > 1:
        back = torch.argsort(qkv_permutation(inner(model).shape, ctx.tp))
        for key in [k for k in names if k.endswith("attn.qkv.weight") or k.endswith("attn.qkv.bias")]:
            msd[key] = msd[key][back]
            for state in ((osd["state"].get(key) or {}),):
                for name, value in list(state.items()):
                    if torch.is_tensor(value) and value.dim() >= 1 and value.shape[0] == len(back):
                        state[name] = value[back]
    # FQN keys -> the integer ids of a plain optimizer over inner(model).named_parameters() (tied once)
    ids, groups = {}, []  # torch numbers parameters in the order of the groups
    was = ctx.extras.get("foreach_was") or [None] * len(osd["param_groups"])
    for g, foreach in zip(osd["param_groups"], was):
        group = {**g, "params": [ids.setdefault(n, len(ids)) for n in g["params"]]}
        if foreach is not None:
            group["foreach"] = foreach
        groups.append(group)
    state = {ids[n]: v for n, v in osd["state"].items()}
    return msd, {"state": state, "param_groups": groups}


__all__ = ["TPAttention", "full_state", "inner", "qkv_permutation", "wrap"]
