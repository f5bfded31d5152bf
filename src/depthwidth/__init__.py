"""depthwidth: the depth-versus-width decision for Transformer language models, measured."""

__version__ = "0.1.0"
