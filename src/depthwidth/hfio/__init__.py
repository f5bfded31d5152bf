"""A local Hugging Face folder: its format, read into our Transformer. Which class holds a shape and its
`config.json` (`arch`), the weight layout both ways (`layout`), safetensors files and the folder's
content hash (`weights`), `tokenizer.json` (`tokenizer`), and a folder of a supported class read back
into our model (`load`: training from it, benchmarking it, inspecting it). `transformers` itself is
never imported here: the files are written and read with `safetensors` and `tokenizers`.

Names are imported on first use (`depthwidth.lazy`)."""

from __future__ import annotations

from depthwidth.lazy import lazy_exports

_EXPORTS = {
    "HFCheckpoint": "depthwidth.hfio.load",
    "choose_arch": "depthwidth.hfio.arch",
    "content_hash": "depthwidth.hfio.weights",
    "hf_config": "depthwidth.hfio.arch",
    "load_hf_model": "depthwidth.hfio.load",
    "read_hf_checkpoint": "depthwidth.hfio.load",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
