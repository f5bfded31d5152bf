"""Pure analytic core: shapes, parameter counts, FLOPs, memory. Standard library only."""

from depthwidth.shapes.params import ParamBreakdown, count_params
from depthwidth.shapes.shape import Shape

__all__ = ["ParamBreakdown", "Shape", "count_params"]
