"""Hostile files: Hugging Face configs (every supported model type, fields of the wrong type, absurd
sizes, unknown or missing fields, broken or truncated JSON, random bytes) through `calc --hf` and
`train --hf`, and checkpoints (truncated, overwritten with random bytes, a recorded shape that is absurd
or does not match the weights, tensors of the wrong size or kind, malformed metadata, pickled objects)
through `bench --checkpoint`. Each ends in exit 0 or exit 2 with one line, within the bounds."""

from __future__ import annotations

import copy
import io
import json

import pytest
import torch
from hypothesis import strategies as st

from depthwidth.model.transformer import Transformer
from depthwidth.shapes.shape import Shape
from depthwidth.artifact.checkpoint import CHECKPOINT_FORMAT

JSON_HOSTILE = (None, True, 0, -1, 1, 3, 7, 64, 65536, 10**12, 10**30, -(10**30), 0.5, 1e-300, 1e308, "", "x", "llama",
                "gelu", "silu", [], ["llama"], {}, {"rope_theta": -1}, {"rope_theta": 10**400})
#: small valid configs of every supported model type (transformers' field names)
HF_BASES = (
    {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 128},
    {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
     "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 128},
    {"model_type": "mistral", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
     "intermediate_size": 128, "vocab_size": 256},
    {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
     "intermediate_size": 128, "vocab_size": 256, "rope_theta": 1e6},
    {"model_type": "gpt_neox", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
     "intermediate_size": 256, "vocab_size": 256, "rotary_emb_base": 10000},
)
SHAPE = Shape(n_layers=2, d_model=16, n_heads=2, vocab_size=32, max_seq_len=16)
SHAPE_HOSTILE = (0, -1, 1, 3, 65536, 10**12, 10**30, 1.5, float("nan"), "2", None, True, [], {}, "rope", "swiglu")


def _raw_json(doc) -> bytes:
    """JSON text; Python's own infinities written as JSON's missing ones (1e999)."""
    return json.dumps(doc).replace("Infinity", "1e999").replace("NaN", "1e999").encode()


@st.composite
def hf_configs(draw) -> bytes:
    doc = copy.deepcopy(draw(st.sampled_from(HF_BASES)))
    for _ in range(draw(st.integers(1, 3))):
        field = draw(st.sampled_from(sorted(doc) + ["head_dim", "tie_word_embeddings", "hidden_act",
                                                    "rope_parameters", "attention_bias", "n_inner", "nosuch"]))
        if draw(st.integers(0, 4)) == 0:
            doc.pop(field, None)
        else:
            doc[field] = copy.deepcopy(draw(st.sampled_from(JSON_HOSTILE)))
    data = _raw_json(doc)
    edit = draw(st.sampled_from(["none", "none", "truncate", "bytes", "big_number", "nested"]))
    if edit == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif edit == "bytes":
        data = draw(st.binary(max_size=64))
    elif edit == "big_number":
        data = data.replace(b"256", b"9" * 5000, 1)
    elif edit == "nested":
        data = b"[" * 100000 + b"]" * 100000
    return data


@pytest.fixture(scope="module")
def checkpoint_bytes() -> bytes:
    """A checkpoint laid out as `save_checkpoint` writes one, with SHAPE's real weights."""
    buf = io.BytesIO()
    torch.save(_payload(SHAPE.to_dict(), Transformer(SHAPE).state_dict()), buf)
    return buf.getvalue()


def _payload(shape: dict, state: dict, meta: str | None = None) -> dict:
    return {"format": CHECKPOINT_FORMAT, "model": state, "optimizer": {}, "rng": {"cpu": torch.get_rng_state()},
            "meta": json.dumps({"step": 1, "shape": shape}) if meta is None else meta}


@st.composite
def checkpoints(draw, good: bytes) -> bytes:
    kind = draw(st.sampled_from(["truncate", "overwrite", "shape", "shape", "state", "meta", "pickle", "random"]))
    if kind == "truncate":
        return good[: draw(st.integers(0, len(good)))]
    if kind == "overwrite":
        data = bytearray(good)
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(data) - 1))
            patch = draw(st.binary(min_size=1, max_size=64))
            data[at:at + len(patch)] = patch
        return bytes(data)
    if kind == "random":
        return b"PK\x03\x04" + draw(st.binary(max_size=256))
    shape, state, meta = SHAPE.to_dict(), Transformer(SHAPE).state_dict(), None
    if kind == "shape":
        for _ in range(draw(st.integers(1, 3))):
            shape[draw(st.sampled_from(sorted(shape)))] = draw(st.sampled_from(SHAPE_HOSTILE))
    elif kind == "state":
        name = draw(st.sampled_from(sorted(state)))
        state[name] = draw(st.sampled_from([torch.zeros(3), torch.zeros(0), torch.zeros(2, 2, dtype=torch.int64),
                                            torch.zeros(10**4, 16), "weights", 1.0]))
        if draw(st.booleans()):
            state.pop(draw(st.sampled_from(sorted(state))))
    elif kind == "meta":
        meta = draw(st.sampled_from(["", "{", "[]", "null", json.dumps({"shape": None}), json.dumps({"step": 1}),
                                     "9" * 5000, "[" * 100000]))
    else:  # a pickled Python object (weights_only refuses it)
        state = {"x": print}
    buf = io.BytesIO()
    torch.save(_payload(shape, state, meta), buf)
    return buf.getvalue()


def test_hostile_hf_configs(harness, fuzz_paths, stand_ins, tmp_path_factory, profile):
    root = tmp_path_factory.mktemp("fuzz-hf")

    def check(data: bytes) -> None:
        path = root / "config.json"
        path.write_bytes(data)
        harness.check("hf", ["calc", "--hf", str(path), "--json"])
        harness.check("hf", ["train", "--hf", str(path), "--steps", "1", "--data", fuzz_paths["text"]])

    harness.fuzz(hf_configs(), check, profile=profile, scale=2)


def test_hostile_checkpoints(harness, stand_ins, checkpoint_bytes, tmp_path_factory, profile):
    root = tmp_path_factory.mktemp("fuzz-ckpt")

    def check(data: bytes) -> None:
        path = root / "checkpoint.pt"
        path.write_bytes(data)
        harness.check("checkpoint", ["bench", "--checkpoint", str(path), "--hardware", "cpu"])

    harness.fuzz(checkpoints(checkpoint_bytes), check, profile=profile, scale=2)


def test_the_unchanged_files_are_accepted(harness, fuzz_paths, stand_ins, checkpoint_bytes, tmp_path):
    for i, base in enumerate(HF_BASES):
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps(base))
        assert harness.run(["calc", "--hf", str(path), "--json"]).code == 0, base
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(checkpoint_bytes)
    result = harness.run(["bench", "--checkpoint", str(path), "--hardware", "cpu"])
    assert result.code == 0, result.stderr
