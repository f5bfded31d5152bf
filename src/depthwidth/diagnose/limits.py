"""The settings of an inspection that the CLI and a study spec check before anything heavy is imported
(no torch here): how many windows, the effective depth's tolerance."""

from __future__ import annotations

#: the most windows (per slice, or of a text) one inspection reads: each costs O(L^2) block forwards
MAX_WINDOWS = 4096
#: windows per validation slice (or of a text) of `depthwidth inspect`
DEFAULT_WINDOWS = 16
#: default tolerance of the effective depth (nats of total loss increase)
DEFAULT_TOLERANCE = 0.01

__all__ = ["DEFAULT_TOLERANCE", "DEFAULT_WINDOWS", "MAX_WINDOWS"]
