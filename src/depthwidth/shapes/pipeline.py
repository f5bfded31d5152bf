"""Pipeline parallelism: which layers and parameters each stage holds, how many micro-batches' activations
it keeps, the bubble of the schedule, and the point-to-point traffic between stages.

Schedules (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", sec. 2.2): `pp` stages, `microbatches` micro-batches per optimizer step.
- 1F1B (PipeDream-Flush, `virtual_stages=1`): stage r runs pp-r-1 warm-up forwards, then alternates one
  forward and one backward, so it keeps the activations of min(microbatches, pp-r) micro-batches.
  The first stage keeps pp micro-batches of its L/pp layers: L layers' worth whatever pp is
  (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 5).
- Interleaved 1F1B (`virtual_stages=V > 1`): each device holds V model chunks of L/(pp*V) layers
  (device r: chunks r, r+pp, ..., as Megatron-LM assigns them); forwards go through the chunks in
  groups of pp micro-batches. Stage r runs 2*(pp-r-1) + (V-1)*pp warm-up chunk-forwards (Megatron-LM's
  `forward_backward_pipelining_with_interleaving`), so the first stage keeps pp*V + pp-1 chunks,
  L*(1 + (pp-1)/(pp*V)) layers' worth: the factor of Korthikanti et al. sec. 4.2.3. Megatron-LM needs
  microbatches to be a multiple of pp and n_layers a multiple of pp*V; both are checked.
Which chunk each kept chunk-forward belongs to is counted exactly (`in_flight`), so the embedding's
activations on the first stage are counted for the micro-batches of chunk 0 in flight (pp with 1F1B,
up to 2*pp-1 when interleaved), and the loss's on the last stage for those of its last chunk (1).

Bubble: with ideal forward+backward time t_f + t_b per micro-batch and stage, a 1F1B step takes
(m + p - 1)(t_f + t_b), so the idle time is (p-1)/m of the ideal step; interleaving divides it by V:
(p-1)/(V*m) (Narayanan et al. 2021, sec. 2.2.1-2.2.2). Of the actual step it is r/(1+r).

Layers when pp does not divide n_layers (1F1B only): every stage gets floor(L/pp) layers and the
L mod pp extra layers go to the last stages, one each. The first stage is the one that keeps pp
micro-batches in flight and the embedding; giving it the fewest layers keeps the peak lowest.

Parameters per stage: its blocks; the first stage also the token (and learned position) embedding,
the last the final norm and the LM head. With tied embeddings and pp > 1 the last stage keeps its own
copy of the embedding matrix for the head (Megatron-LM all-reduces the two copies' gradients), so the
stages together hold one embedding more than the model has. Tensor parallelism splits them as
`depthwidth.shapes.memory.params_per_device` says.

Not counted: the output tensor a stage sends (Megatron-LM frees it after the send, Korthikanti et al.
appendix B; our activation terms are the tensors saved for backward, which do not include it), the
receive buffers in flight, and schedules other than these two (GPipe keeps all m micro-batches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from depthwidth.errors import UserError
from depthwidth.serial import Serializable, hook
from depthwidth.shapes.checks import check_int
from depthwidth.shapes.comm import pipeline_p2p_bytes
from depthwidth.shapes.params import count_params, norm_params
from depthwidth.shapes.shape import Shape

SCHEDULES = ("1f1b", "interleaved-1f1b")


def ceil_div(n: int, t: int) -> int:
    return -(-n // t)


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineSetup(Serializable):
    """pp stages, virtual_stages model chunks per stage (1: 1F1B, >1: interleaved 1F1B), microbatches per
    optimizer step (default pp: the fewest that fill a 1F1B pipeline)."""

    pp: int = 1
    virtual_stages: int = 1
    microbatches: int | None = field(default=None, metadata=hook(followed_by=("schedule",)))

    def __post_init__(self) -> None:
        check_int("pp", self.pp)
        check_int("virtual_stages", self.virtual_stages)
        if self.microbatches is None:
            object.__setattr__(self, "microbatches", self.pp)
        check_int("microbatches", self.microbatches)
        if self.virtual_stages > 1:
            if self.pp == 1:
                raise UserError(f"virtual_stages={self.virtual_stages} needs pp > 1: interleaving splits each "
                                "pipeline stage into model chunks")
            if self.microbatches % self.pp:
                raise UserError(f"microbatches={self.microbatches} must be a multiple of pp={self.pp} with "
                                f"virtual_stages={self.virtual_stages} (the interleaved schedule runs micro-batches "
                                "in groups of pp)")

    @property
    def schedule(self) -> str:
        return "interleaved-1f1b" if self.virtual_stages > 1 else "1f1b"

    def check_shape(self, shape: Shape) -> None:
        if self.pp > shape.n_layers:
            raise UserError(f"pp={self.pp} exceeds n_layers={shape.n_layers}; each pipeline stage needs a layer")
        chunks = self.pp * self.virtual_stages
        if self.virtual_stages > 1 and shape.n_layers % chunks:
            raise UserError(f"virtual_stages={self.virtual_stages}: n_layers={shape.n_layers} is not a multiple of "
                            f"pp x virtual_stages = {chunks} (interleaving gives every model chunk as many layers)")


def stage_layers(n_layers: int, setup: PipelineSetup) -> tuple[int, ...]:
    """Blocks on each stage: floor(L/pp), the L mod pp extra ones on the last stages (module docstring)."""
    base, extra = divmod(n_layers, setup.pp)
    return tuple(base + (1 if r >= setup.pp - extra else 0) for r in range(setup.pp))


def in_flight(setup: PipelineSetup, rank: int) -> tuple[int, ...]:
    """Micro-batches whose activations stage `rank` keeps at its peak, per model chunk (chunk c of stage r
    is virtual stage r + c*pp): the warm-up forwards plus the first steady-state one (module docstring)."""
    p, v, m = setup.pp, setup.virtual_stages, setup.microbatches
    if v == 1:
        return (min(m, p - rank),)
    forwards = min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v)
    counts = [0] * v
    for k in range(forwards):  # the k-th chunk-forward of a stage runs chunk (k // pp) % V
        counts[(k // p) % v] += 1
    return tuple(counts)


def interleave_factor(setup: PipelineSetup) -> float:
    """Layers' worth of activations the first stage keeps, over n_layers: 1 for 1F1B, 1 + (p-1)/(p*V)
    interleaved (Korthikanti et al. 2022, sec. 4.2.3), when there are enough micro-batches to fill it."""
    if setup.virtual_stages == 1:
        return 1.0
    return 1 + (setup.pp - 1) / (setup.pp * setup.virtual_stages)


def bubble_ratio(*, pp: int, virtual_stages: int = 1, microbatches: int) -> float:
    """Pipeline idle time over the ideal step, (p-1)/(V*m) (Narayanan et al. 2021, sec. 2.2)."""
    setup = PipelineSetup(pp=pp, virtual_stages=virtual_stages, microbatches=microbatches)
    return (setup.pp - 1) / (setup.virtual_stages * setup.microbatches)


def stage_params(shape: Shape, setup: PipelineSetup, *, tp: int = 1) -> tuple[int, ...]:
    """Parameters each stage holds on one tensor-parallel rank (module docstring): its blocks, the
    embedding on the first, final norm and LM head on the last (a tied head's own copy when pp > 1).
    The tp-split part of a stage is rounded up once, so pp=1 gives `memory.params_per_device`."""
    check_int("tp", tp)
    counts = count_params(shape)
    row_biases = 2 * shape.d_model if shape.linear_bias else 0  # attention out, MLP down: replicated
    block_replicated = 2 * norm_params(shape) + row_biases
    out = []
    for rank, layers in enumerate(stage_layers(shape.n_layers, setup)):
        split, replicated = layers * (counts.per_layer - block_replicated), layers * block_replicated
        if rank == 0:
            split += counts.embedding
            replicated += counts.position
        if rank == setup.pp - 1:
            replicated += norm_params(shape) if shape.final_norm else 0
            if counts.head:
                split += counts.head
            elif shape.lm_head and setup.pp > 1:  # tied: the last stage's copy of the embedding
                split += counts.embedding
        out.append(ceil_div(split, tp) + replicated)
    return tuple(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class StageMemory(Serializable):
    """One pipeline stage on one device (bytes unless stated)."""

    stage: int
    layers: int
    params: int  # parameters the device holds
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int = field(metadata=hook(followed_by=("model_states_bytes",)))
    in_flight: tuple[int, ...]  # micro-batches kept, per model chunk
    layers_kept: int  # sum over chunks of micro-batches in flight x layers of the chunk
    layer_activation_bytes: int  # layers_kept x one block's kept bytes
    #: embedding (first stage), final norm, head and loss (last stage)
    outside_activation_bytes: int = field(metadata=hook(followed_by=("kept_activation_bytes",)))
    #: one block's recomputed working set during its backward
    recompute_bytes: int = field(metadata=hook(followed_by=("activation_bytes",)))
    #: the logits of the micro-batch in its loss (last stage)
    logits_bytes: int = field(metadata=hook(followed_by=("total_bytes",)))

    @property
    def model_states_bytes(self) -> int:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def kept_activation_bytes(self) -> int:
        """Activations saved between forward and backward: what Korthikanti et al. count."""
        return self.layer_activation_bytes + self.outside_activation_bytes

    @property
    def activation_bytes(self) -> int:
        return self.kept_activation_bytes + self.recompute_bytes

    @property
    def total_bytes(self) -> int:
        return self.model_states_bytes + self.activation_bytes + self.logits_bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineBreakdown:
    """Every stage's memory, the peak one, the bubble and the stage-to-stage traffic of one step."""

    setup: PipelineSetup
    stages: tuple[StageMemory, ...]
    bubble_ratio: float  # idle time / ideal step
    p2p: dict[str, int]  # `depthwidth.shapes.comm.pipeline_p2p_bytes`

    @property
    def peak(self) -> StageMemory:
        """The stage with the most memory (the first one wins a tie)."""
        return max(self.stages, key=lambda s: (s.total_bytes, -s.stage))

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the actual step: r / (1 + r)."""
        return self.bubble_ratio / (1 + self.bubble_ratio)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.setup.to_dict(),
            "interleave_factor": interleave_factor(self.setup),
            "layers_per_stage": [s.layers for s in self.stages],
            "peak_stage": self.peak.stage,
            "bubble_ratio": self.bubble_ratio,
            "bubble_fraction": self.bubble_fraction,
            "p2p": dict(self.p2p),
            "stages": [s.to_dict() for s in self.stages],
        }


def pipeline_memory(
    shape: Shape, setup: PipelineSetup, *, tp: int, sp: bool, tokens: int, layer_bytes: int, recompute_bytes: int,
    embed_bytes: int, head_bytes: int, logits_bytes: int, residual_bytes: int,
    states: Callable[[int], tuple[int, int, int]],
) -> PipelineBreakdown:
    """Each stage's memory from one block's kept bytes (`layer_bytes`) and working set
    (`recompute_bytes`), the embedding's and the head's kept bytes per micro-batch, the logits, and
    `states(n_params) -> (param, grad, optimizer bytes)` (after ZeRO sharding)."""
    setup.check_shape(shape)
    layers = stage_layers(shape.n_layers, setup)
    params = stage_params(shape, setup, tp=tp)
    chunk_layers = shape.n_layers // (setup.pp * setup.virtual_stages)  # interleaved: exact, checked
    last = setup.pp - 1
    stages = []
    for rank in range(setup.pp):
        kept = in_flight(setup, rank)
        held = kept[0] * layers[rank] if setup.virtual_stages == 1 else sum(kept) * chunk_layers
        outside = (kept[0] * embed_bytes if rank == 0 else 0) + (kept[-1] * head_bytes if rank == last else 0)
        p_b, g_b, o_b = states(params[rank])
        stages.append(StageMemory(
            stage=rank, layers=layers[rank], params=params[rank], params_bytes=p_b, grads_bytes=g_b,
            optimizer_bytes=o_b, in_flight=kept, layers_kept=held, layer_activation_bytes=held * layer_bytes,
            outside_activation_bytes=outside, recompute_bytes=recompute_bytes if layers[rank] else 0,
            logits_bytes=logits_bytes if rank == last else 0,
        ))
    p2p = pipeline_p2p_bytes(tokens=tokens, d_model=shape.d_model, elem_bytes=residual_bytes, pp=setup.pp,
                             virtual_stages=setup.virtual_stages, microbatches=setup.microbatches, tp=tp, sp=sp)
    ratio = bubble_ratio(pp=setup.pp, virtual_stages=setup.virtual_stages, microbatches=setup.microbatches)
    return PipelineBreakdown(setup=setup, stages=tuple(stages), bubble_ratio=ratio, p2p=p2p)


__all__ = [
    "SCHEDULES", "PipelineBreakdown", "PipelineSetup", "StageMemory", "bubble_ratio", "in_flight",
    "interleave_factor", "pipeline_memory", "stage_layers", "stage_params",
]
