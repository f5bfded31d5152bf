"""Bytes of every collective one optimizer step of a multi-process run issues, by kind, and their time.

Exact for the trainer's layouts (`depthwidth.train.parallelize`), one step of m = batch / micro_batch
micro-batches of b = micro_batch / dp sequences of T tokens per data-parallel rank, dp = nproc / tp:

- ddp (tp = 1): one all-reduce of every gradient, 4 bytes per parameter (fp32 gradients), per step
  (micro-batches before the last skip it); DDP splits it into buckets, the byte total is exact.
- fsdp: each unit (every block, then the root: embeddings, final norm, head) all-gathers its parameters
  before forward and, with reshard (given to every unit, the root too), again before backward, and
  reduce-scatters its gradients, every micro-batch. A unit's bytes are fp32 parameters with each
  tensor's first dimension padded to a multiple of dp (FSDP2 shards dim 0 in equal chunks).
- tp > 1: per layer and micro-batch, forward one all-reduce after the attention output and one after
  the MLP down projection, backward one of the input gradient of the QKV, up (and gate, SwiGLU)
  projections: (b x T x d_model) each, forward in the activation dtype, backward in fp32.
Bytes of a collective: what each rank contributes to an all-reduce, the unsharded tensor of a
reduce-scatter or all-gather. Time (ring algorithms, Patarasuk and Yuan 2009): all-reduce
2(r-1)/r x n / bw + 2(r-1) x latency; reduce-scatter and all-gather half of that; bw and latency a
measured link (`depthwidth hw measure --collectives`) or a hardware row.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.shapes.shape import Shape

KINDS = ("all_reduce", "reduce_scatter", "all_gather")


def block_tensors(shape: Shape) -> list[tuple[int, ...]]:
    """Sizes of one block's parameters (as `model.transformer.Block` holds them)."""
    d, q, kv, f = shape.d_model, shape.q_dim, shape.kv_dim, shape.d_ff
    norm = [(d,), (d,)] if shape.norm_bias else [(d,)]
    out = [*norm, (q + 2 * kv, d)]
    if shape.qkv_bias:
        out.append((q + 2 * kv,))
    out.append((d, q))
    if shape.linear_bias:
        out.append((d,))
    out += norm
    mlp = [(f, d)] + ([(f,)] if shape.linear_bias else [])
    out += mlp + (mlp if shape.ffn == "swiglu" else [])
    out += [(d, f)] + ([(d,)] if shape.linear_bias else [])
    return out


def root_tensors(shape: Shape) -> list[tuple[int, ...]]:
    """Sizes of the parameters outside the blocks: embeddings, final norm, untied head."""
    d = shape.d_model
    out = [(shape.vocab_size, d)]
    if shape.pos == "learned":
        out.append((shape.max_seq_len, d))
    if shape.final_norm:
        out += [(d,), (d,)] if shape.norm_bias else [(d,)]
    if shape.lm_head and not shape.tie_embeddings:
        out.append((shape.vocab_size, d))
    return out


def _numel(size: tuple[int, ...], *, pad_to: int = 1) -> int:
    first = -(-size[0] // pad_to) * pad_to
    rest = 1
    for s in size[1:]:
        rest *= s
    return first * rest


@dataclass(frozen=True, kw_only=True, slots=True)
class Collective:
    kind: str
    calls: int | None  # None: the framework decides (DDP's buckets)
    bytes: int
    ranks: int
    seconds: float | None = None

    def to_dict(self) -> dict:
        return {"calls": self.calls, "bytes": self.bytes, "ranks": self.ranks, "seconds": self.seconds}


def step_collectives(shape: Shape, *, nproc: int, parallel: str, tp: int, batch_size: int, micro_batch: int,
                     seq_len: int, act_bytes: int = 4, reshard: bool = True) -> dict[str, Collective]:
    """Collectives of one optimizer step by kind (module docstring); kinds a layout does not issue are absent."""
    dp = nproc // tp
    m = batch_size // micro_batch
    b = micro_batch // dp
    out: dict[str, Collective] = {}
    if tp > 1:
        n_col = 3 if shape.ffn == "swiglu" else 2
        per = b * seq_len * shape.d_model
        calls = m * shape.n_layers * (2 + n_col)
        nbytes = m * shape.n_layers * per * (2 * act_bytes + n_col * 4)
        out["all_reduce"] = Collective(kind="all_reduce", calls=calls, bytes=nbytes, ranks=tp)
    if dp > 1 and parallel == "ddp":
        params = sum(_numel(s) for s in block_tensors(shape)) * shape.n_layers + sum(
            _numel(s) for s in root_tensors(shape))
        out["all_reduce"] = Collective(kind="all_reduce", calls=None, bytes=4 * params, ranks=dp)
    if dp > 1 and parallel == "fsdp":
        def unit(sizes):  # tp-sharded tensors: the local shard's dim 0 is padded
            return 4 * sum(_numel(_local(s, shape, tp), pad_to=dp) for s in sizes)

        blk, root = unit(block_tensors(shape)), unit(root_tensors(shape))
        units = shape.n_layers + 1
        twice = 2 if reshard else 1
        out["all_gather"] = Collective(kind="all_gather", calls=m * units * twice, ranks=dp,
                                       bytes=m * twice * (shape.n_layers * blk + root))
        out["reduce_scatter"] = Collective(kind="reduce_scatter", calls=m * units, ranks=dp,
                                           bytes=m * (shape.n_layers * blk + root))
    return out


def _local(size: tuple[int, ...], shape: Shape, tp: int) -> tuple[int, ...]:
    """A block tensor's size on one tp rank: column-wise (dim 0) QKV/up/gate, row-wise (dim 1) out/down."""
    if tp == 1:
        return size
    d = shape.d_model
    col = {(shape.q_dim + 2 * shape.kv_dim, d), (shape.q_dim + 2 * shape.kv_dim,), (shape.d_ff, d), (shape.d_ff,)}
    if size in col:
        return (size[0] // tp, *size[1:])
    if size in {(d, shape.q_dim), (d, shape.d_ff)}:
        return (d, size[1] // tp)
    return size


def collective_seconds(kind: str, *, nbytes: float, calls: int, ranks: int, bandwidth: float,
                       latency_s: float) -> float:
    """Ring time of `calls` collectives of `nbytes` in total over `ranks` (module docstring)."""
    if ranks == 1:
        return 0.0
    factor = 2 if kind == "all_reduce" else 1
    return factor * ((ranks - 1) / ranks * nbytes / bandwidth + calls * (ranks - 1) * latency_s)


def with_seconds(collectives: dict[str, Collective], *, bandwidth: float, latency_s: float,
                 measured_calls: dict[str, float] | None = None) -> dict[str, Collective]:
    """The same collectives with their predicted time; DDP's bucket count comes from `measured_calls`."""
    out = {}
    for kind, c in collectives.items():
        calls = c.calls if c.calls is not None else (measured_calls or {}).get(kind, 1)
        secs = collective_seconds(kind, nbytes=c.bytes, calls=calls, ranks=c.ranks, bandwidth=bandwidth,
                                  latency_s=latency_s)
        out[kind] = Collective(kind=kind, calls=c.calls, bytes=c.bytes, ranks=c.ranks, seconds=secs)
    return out


__all__ = ["Collective", "KINDS", "block_tensors", "collective_seconds", "root_tensors", "step_collectives",
           "with_seconds"]
