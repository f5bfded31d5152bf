"""The model of a run, built from its shape and its `TrainConfig`: the one place that turns a recorded
config into the forward pass. The trainer builds its model here and every reader of a trained run
(`load_trained`: bench, hf export, study export, inspect, init checks) rebuilds it here, so a setting that
changes the forward pass is taught to one function, never to each reader.
"""

from __future__ import annotations

from depthwidth.artifact.config import TrainConfig
from depthwidth.model.transformer import Transformer
from depthwidth.shapes.parametrization import Multipliers, multipliers
from depthwidth.shapes.shape import Shape


def run_multipliers(shape: Shape, config: TrainConfig) -> Multipliers:
    """The multipliers of `config.parametrization` for `shape` (base sizes from the config; None = the
    shape's own). Raises UserError for a scheme the shape cannot take (depth scaling of post-norm blocks)."""
    return multipliers(config.parametrization, d_model=shape.d_model, n_layers=shape.n_layers,
                       head_dim=shape.head_dim, base_width=config.base_width, base_depth=config.base_depth,
                       norm_position=shape.norm_position)


def build_model(shape: Shape, config: TrainConfig, *, attn_impl: str | None = None,
                dropout: float | None = None) -> Transformer:
    """`Transformer(shape)` with the run's forward settings: its parametrization's multipliers, its attention
    kernel (or `attn_impl`) and its dropout (or `dropout`; readers pass 0.0 for evaluation). The weights are
    the initialisation of the current torch RNG state."""
    return Transformer(shape, attn_impl=config.attn_impl if attn_impl is None else attn_impl,
                       dropout=config.dropout if dropout is None else dropout,
                       scaling=run_multipliers(shape, config))


__all__ = ["build_model", "run_multipliers"]
