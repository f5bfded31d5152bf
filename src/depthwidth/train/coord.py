"""The coordinate check (Yang et al. 2022, arXiv 2203.03466, sec. D.1; CompleteP, arXiv 2505.01618, Fig. 7):
train each (parametrization, width, depth) for a few AdamW steps and record the root-mean-square size of
every layer's activations, of the logits, and of their change since initialisation ("updates"), all on
one fixed probe batch. Under a parametrization that is right for the sizes varied, the sizes stay flat as
width and depth grow; under SP they grow.

Every model is built by `depthwidth.model.Transformer` with the run's multipliers and trained by the real
optimizer (`depthwidth.train.optim.make_optimizer`) on the run's batches (`depthwidth.data.BatchStream`),
so what is checked is what `depthwidth train` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from depthwidth.data.batches import BatchStream, gather_windows
from depthwidth.data.dataset import Dataset, load_dataset
from depthwidth.errors import UserError
from depthwidth.machine.processes import check_per_core
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.checks import shown
from depthwidth.shapes.parametrization import PARAMETRIZATIONS
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.config import TrainConfig
from depthwidth.artifact.schedule import lr_at
from depthwidth.artifact.model import build_model
from depthwidth.train.optim import make_optimizer


@dataclass(frozen=True, kw_only=True, slots=True)
class CoordPoint:
    """One model's sizes after `steps` steps: per block (residual stream after it), the embedding output
    and the logits; `*_update` is the RMS of the change since step 0 on the same probe batch."""

    parametrization: str
    width: int
    depth: int
    embed: float
    layers: tuple[float, ...]
    logits: float
    layer_update: tuple[float, ...]
    logits_update: float
    loss: float

    @property
    def last(self) -> float:
        return self.layers[-1]

    def to_dict(self) -> dict:
        return {"parametrization": self.parametrization, "width": self.width, "depth": self.depth,
                "embed_rms": self.embed, "layer_rms": list(self.layers), "last_layer_rms": self.last,
                "logits_rms": self.logits, "layer_update_rms": list(self.layer_update),
                "last_layer_update_rms": self.layer_update[-1], "logits_update_rms": self.logits_update,
                "loss": self.loss}


@dataclass(frozen=True, kw_only=True, slots=True)
class CoordResult:
    points: tuple[CoordPoint, ...]
    steps: int
    lr: float
    base_width: int
    base_depth: int
    settings: dict = field(default_factory=dict)

    def growth(self, parametrization: str, *, over: str, key: str = "last") -> float | None:
        """Ratio of `key` (last, logits, last_update) at the largest to the smallest `over` (width or depth),
        the other size held at its smallest value; None with fewer than two sizes."""
        mine = [p for p in self.points if p.parametrization == parametrization]
        other = "depth" if over == "width" else "width"
        if not mine:
            return None
        held = min(getattr(p, other) for p in mine)
        line = sorted((p for p in mine if getattr(p, other) == held), key=lambda p: getattr(p, over))
        if len(line) < 2:
            return None
        values = [{"last": p.last, "logits": p.logits, "last_update": p.layer_update[-1]}[key] for p in line]
        return values[-1] / values[0] if values[0] > 0 else math.inf

    def to_dict(self) -> dict:
        params = sorted({p.parametrization for p in self.points}, key=PARAMETRIZATIONS.index)
        growth = {pz: {over: {k: self.growth(pz, over=over, key=k) for k in ("last", "logits", "last_update")}
                       for over in ("width", "depth")} for pz in params}
        return {"steps": self.steps, "lr": self.lr, "base_width": self.base_width, "base_depth": self.base_depth,
                "settings": self.settings, "growth": growth, "points": [p.to_dict() for p in self.points]}


#: Upper bounds of a check's sizes (the `depthwidth check` flags), far above what a check needs (its
#: defaults: widths 64-256, depths 2-32, 10 or 200 steps, 8 learning rates), so that a typo fails at once
#: instead of allocating or training for hours; the largest model must also fit in the memory free now
#: (`check_largest_fits`).
CHECK_LIMITS = {
    "width": (8192, "32x the default widest, 256: a check compares small models"),
    "depth": (1024, "32x the default deepest, 32: a check compares small models"),
    "values": (64, "sizes or learning rates per list; a check's defaults have 3 to 8"),
    "steps": (100_000, "500x the default of a transfer sweep, 200"),
    "trainings": (2048, "trainings of one transfer sweep, 20x its default of 96"),
}


def check_sizes(widths, depths, *, head_dim: int, steps: int | None = None) -> None:
    """The widths, depths and steps of a check, each within `CHECK_LIMITS`; UserError naming the flag."""
    for name, values, limit in (("--widths", widths, "width"), ("--depths", depths, "depth")):
        if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
            raise UserError(f"{name} {shown(values)} must be positive integers")
        check_count(name, len(values))
        most, why = CHECK_LIMITS[limit]
        if max(values) > most:
            raise UserError(f"{name}: {shown(max(values))} is above the limit of {most:,} ({why})")
    bad = [w for w in widths if w % head_dim]
    if bad:
        raise UserError(f"--widths {','.join(map(str, bad))} must be multiples of --head-dim {head_dim}")
    if steps is not None and steps > CHECK_LIMITS["steps"][0]:
        raise UserError(f"--steps {shown(steps)} is above the limit of {CHECK_LIMITS['steps'][0]:,} "
                        f"({CHECK_LIMITS['steps'][1]})")


def check_count(name: str, n: int) -> None:
    """A list of a check (`name`, the flag) holds at most CHECK_LIMITS["values"] values."""
    most, why = CHECK_LIMITS["values"]
    if n > most:
        raise UserError(f"{name}: {n:,} values, above the limit of {most} ({why})")


def check_largest_fits(widths, depths, *, head_dim: int, vocab_size: int, seq_len: int) -> None:
    """The largest model of the grid, trained with AdamW (fp32 weights, gradients and two moments), fits
    in the memory free now (`machine.check_fits`), before any model is built."""
    from depthwidth.machine import check_fits
    from depthwidth.shapes.params import count_params

    largest = sized_shape(max(widths), max(depths), head_dim=head_dim, vocab_size=vocab_size, seq_len=seq_len)
    check_fits(16 * count_params(largest).total,
               what=f"training {largest.label()} (fp32 weights, gradients and two AdamW moments)")


def check_parametrizations(names) -> None:
    for name in names:
        if name not in PARAMETRIZATIONS:
            raise UserError(f"--parametrization {name!r} is not allowed; expected a comma-separated list of "
                            f"{', '.join(PARAMETRIZATIONS)}")


def sized_shape(width: int, depth: int, *, head_dim: int, vocab_size: int, seq_len: int) -> Shape:
    """The model of one grid point: GPT-2 conventions (pre-norm, GELU, LayerNorm, learned positions, tied
    head), `head_dim` fixed so the number of heads grows with width."""
    return Shape(n_layers=depth, d_model=width, n_heads=width // head_dim, vocab_size=vocab_size, max_seq_len=seq_len)


def rms(t: torch.Tensor) -> float:
    return float(t.detach().float().pow(2).mean().sqrt())


class _Recorder:
    """Forward hooks: the embedding sum (the input of block 0) and every block's output."""

    def __init__(self, model: Transformer) -> None:
        self.outputs: list[torch.Tensor] = []
        self.embed: torch.Tensor | None = None
        self.handles = [b.register_forward_hook(lambda _m, _i, out: self.outputs.append(out.detach().clone()))
                        for b in model.blocks]
        self.handles.append(model.blocks[0].register_forward_pre_hook(self._pre))

    def _pre(self, _module, args):
        self.embed = args[0].detach().clone()

    def __call__(self, model: Transformer, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
        self.outputs = []
        with torch.no_grad():
            logits, _ = model(x)
        return self.embed, self.outputs, logits.detach()

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def coord_point(shape: Shape, config: TrainConfig, stream: BatchStream, probe: torch.Tensor) -> CoordPoint:
    """Train `shape` under `config` for `config.steps` steps and measure it (see the module docstring)."""
    torch.manual_seed(config.seed)
    model = build_model(shape, config, dropout=0.0).train()
    optimizer = make_optimizer(model, config)
    params = [p for g in optimizer.param_groups for p in g["params"]]
    recorder = _Recorder(model)
    try:
        _, layers0, logits0 = recorder(model, probe)
        loss = math.nan
        for step in range(config.total_steps):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(config, step) * group["lr_scale"]
            x, y = gather_windows(stream.tokens, stream.positions(step), config.seq_len)
            _, out = model(torch.from_numpy(x), torch.from_numpy(y))
            out.backward()
            if config.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            loss = float(out.detach())
        embed, layers, logits = recorder(model, probe)
    finally:
        recorder.close()
    return CoordPoint(parametrization=config.parametrization, width=shape.d_model, depth=shape.n_layers,
                      embed=rms(embed), layers=tuple(rms(h) for h in layers), logits=rms(logits),
                      layer_update=tuple(rms(h - h0) for h, h0 in zip(layers, layers0)),
                      logits_update=rms(logits - logits0), loss=loss)


def coord_check(*, widths, depths, parametrizations, steps: int = 10, lr: float = 1e-2, head_dim: int = 16,
                corpus: str = "shakespeare", seq_len: int = 64, batch_size: int = 8, seed: int = 0,
                threads: int | None = 1, base_width: int | None = None, base_depth: int | None = None,
                dataset: Dataset | None = None, progress=None) -> CoordResult:
    """Every (parametrization, width, depth) of the grid; base sizes default to the smallest width and depth
    (there every parametrization's LR factors are 1). Constant LR (the check looks at the first steps)."""
    check_sizes(widths, depths, head_dim=head_dim, steps=steps)
    check_parametrizations(parametrizations)
    check_per_core("--threads", threads)
    base_width, base_depth = base_width or min(widths), base_depth or min(depths)
    base = TrainConfig(corpus=corpus, steps=steps, lr=lr, schedule="constant", seq_len=seq_len,
                       batch_size=batch_size, seed=seed, threads=threads, device="cpu", base_width=base_width,
                       base_depth=base_depth)
    if dataset is None:
        dataset = load_dataset(corpus=corpus, tokenizer=base.tokenizer, val_fraction=base.val_fraction)
    check_largest_fits(widths, depths, head_dim=head_dim, vocab_size=dataset.vocab_size, seq_len=seq_len)
    stream = BatchStream(dataset, seq_len=seq_len, batch_size=batch_size, seed=seed)
    probe_x, _ = gather_windows(stream.tokens, stream.positions(10**6), seq_len)  # a batch no step trains on
    probe = torch.from_numpy(probe_x)
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    points = []
    try:
        for pz in parametrizations:
            config = base.with_(parametrization=pz)
            for depth in depths:
                for width in widths:
                    shape = sized_shape(width, depth, head_dim=head_dim, vocab_size=dataset.vocab_size,
                                        seq_len=seq_len)
                    points.append(coord_point(shape, config, stream, probe))
                    if progress is not None:
                        progress(points[-1])
    finally:
        torch.set_num_threads(previous)
    settings = {"corpus": corpus, "seq_len": seq_len, "batch_size": batch_size, "head_dim": head_dim, "seed": seed,
                "threads": threads}
    return CoordResult(points=tuple(points), steps=steps, lr=lr, base_width=base_width, base_depth=base_depth,
                       settings=settings)


__all__ = ["CHECK_LIMITS", "CoordPoint", "CoordResult", "check_count", "check_largest_fits", "check_sizes",
           "coord_check", "coord_point", "sized_shape"]
