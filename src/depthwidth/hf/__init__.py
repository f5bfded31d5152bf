"""Hugging Face export: a trained run exported as a `transformers` model folder (config.json,
model.safetensors, tokenizer.json) of the class that holds its shape exactly, its forward multipliers
folded into the weights, and the probe tasks as lm-evaluation-harness task configs. The folder format
itself, and reading a folder back into our model, is `depthwidth.hfio`. `transformers` itself is never
imported here.

Names are imported on first use (`depthwidth.lazy`)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "ExportResult": "depthwidth.hf.export",
    "export_model": "depthwidth.hf.export",
    "export_run": "depthwidth.hf.export",
    "write_harness_tasks": "depthwidth.hf.harness",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
