"""Hugging Face interchange: a trained run exported as a `transformers` model folder (config.json,
model.safetensors, tokenizer.json) of the class that holds its shape exactly, a local folder of a
supported class read back into our model (training from it, benchmarking it), and the probe tasks as
lm-evaluation-harness task configs. `transformers` itself is never imported here: the files are
written and read with `safetensors` and `tokenizers`.

Names are imported on first use (`depthwidth.lazy`)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "ExportResult": "depthwidth.hf.export",
    "HFCheckpoint": "depthwidth.hf.load",
    "choose_arch": "depthwidth.hf.arch",
    "content_hash": "depthwidth.hf.weights",
    "export_model": "depthwidth.hf.export",
    "export_run": "depthwidth.hf.export",
    "hf_config": "depthwidth.hf.arch",
    "load_hf_model": "depthwidth.hf.load",
    "read_hf_checkpoint": "depthwidth.hf.load",
    "write_harness_tasks": "depthwidth.hf.harness",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
