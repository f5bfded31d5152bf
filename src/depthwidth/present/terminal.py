"""The console every command prints to."""

from __future__ import annotations

import sys

#: columns when stdout is not a terminal (a pipe or a file), so tables are not squeezed to rich's 80
PIPE_WIDTH = 160


def console(*, stderr: bool = False):
    """A rich Console on stdout (or stderr) as wide as the terminal, or `PIPE_WIDTH` columns when the
    stream is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH)


__all__ = ["PIPE_WIDTH", "console"]
