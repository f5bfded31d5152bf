"""Hostile files: Hugging Face configs (every supported model type, fields of the wrong type, absurd
sizes, unknown or missing fields, broken or truncated JSON, random bytes) through `calc --hf` and
`train --hf`, and checkpoints (truncated, overwritten with random bytes, a recorded shape that is absurd
or does not match the weights, tensors of the wrong size or kind, malformed metadata, pickled objects)
through `bench --checkpoint`, and Hugging Face model folders made from small real exports of every class
we import (shard index values, tensor names, dtypes, sizes and values, tokenizer files, files that are
FIFOs, devices or folders) through `bench --hf-model` and `train --init-from`. Each ends in exit 0 or
exit 2 with one line, within the bounds."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

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


# ---- Hugging Face model folders: through `bench --hf-model` and `train --init-from` -------------
HF_FOLDER_SHAPES = {
    "gpt2": Shape(n_layers=1, d_model=16, n_heads=2, vocab_size=256, max_seq_len=16),
    "llama": Shape(n_layers=1, d_model=16, n_heads=2, n_kv_heads=1, vocab_size=256, max_seq_len=16, ffn="swiglu",
                   norm="rmsnorm", pos="rope", bias="none"),
    "qwen2": Shape(n_layers=1, d_model=16, n_heads=2, n_kv_heads=1, vocab_size=256, max_seq_len=16, ffn="swiglu",
                   norm="rmsnorm", pos="rope", bias="qkv"),
    "gpt_neox": Shape(n_layers=1, d_model=16, n_heads=2, vocab_size=256, max_seq_len=16, pos="rope"),
}
SHARD_NAMES = (3, None, True, [], {}, "", " ", ".", "..", "../model.safetensors", "/etc/passwd", "/dev/zero",
               "sub/../../x.safetensors", "a\0b", "a\\b", "x" * 5000, "config.json", "tokenizer_config.json",
               "model.safetensors.index.json", "absent.safetensors", "sub", "model-1.safetensors",
               "model-2.safetensors", "link.safetensors")
TENSOR_NAMES = ("", "x" * 10000, "lm_head.weight", "embed_out.weight", "transformer.h.9.ln_1.weight",
                "model.layers.0.self_attn.rotary_emb.inv_freq", "\u202e", "model.norm.weight")
DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int64, torch.float16, torch.bfloat16, torch.float64)
FILE_KINDS = ("fifo", "devzero", "folder", "dangling", "nested", "truncate", "bytes", "list", "empty")
HF_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer_config.json",
            "tokenizer.json")


@pytest.fixture(scope="module")
def hf_exports(tmp_path_factory) -> dict:
    """A small real export of every class we import, as file name -> bytes."""
    from depthwidth.data.tokenizers import ByteTokenizer
    from depthwidth.hf.export import export_model

    root, out = tmp_path_factory.mktemp("fuzz-hf-exports"), {}
    for model_type, shape in HF_FOLDER_SHAPES.items():
        torch.manual_seed(0)
        folder = export_model(Transformer(shape).state_dict(), shape, tokenizer=ByteTokenizer(),
                              out_dir=root / model_type).out_dir
        out[model_type] = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}
    return out


#: how a tensor is spoiled: its dtype, its size (which dimension, by how much), its values
SPOIL_KINDS = ("dtype", "grow", "shrink", "drop", "add", "flip", "nan", "inf", "empty")


def _spoiled_tensor(spoil: tuple, t: torch.Tensor) -> torch.Tensor:
    kind, dtype, at, delta = spoil
    shape = list(t.shape)
    at %= len(shape)
    if kind == "dtype":
        return t.to(dtype)
    if kind in ("nan", "inf"):
        out = t.clone().reshape(-1)
        out[0] = float(kind)
        return out.reshape(t.shape)
    if kind == "grow":
        shape[at] += delta
    elif kind == "shrink":
        shape[at] = max(0, shape[at] - delta)
    elif kind == "drop":
        shape = shape[1:]
    elif kind == "add":
        shape = [*shape, delta]
    elif kind == "flip":
        shape = shape[::-1]
    else:
        shape = [0]
    return torch.zeros(shape)


@st.composite
def hf_folder_edits(draw, exports: dict) -> tuple[str, list]:
    """(model type, edits): each edit ("tensors", dict) | ("index", object) | ("file", name, kind or bytes)."""
    model_type = draw(st.sampled_from(sorted(exports)))
    edits = []
    for _ in range(draw(st.integers(1, 2))):
        what = draw(st.sampled_from(["tensor", "tensor", "name", "index", "index", "file", "file", "tokenizer"]))
        if what in ("tensor", "name"):
            spoil = (draw(st.sampled_from(SPOIL_KINDS)), draw(st.sampled_from(DTYPES)), draw(st.integers(0, 3)),
                     draw(st.integers(1, 3)))
            edits.append((what, draw(st.integers(0, 10**6)), draw(st.sampled_from(TENSOR_NAMES)), spoil))
        elif what == "index":
            values = draw(st.lists(st.sampled_from(SHARD_NAMES), min_size=1, max_size=3))
            edits.append(("index", values, draw(st.sampled_from(["map", "map", "top", "bytes"]))))
        elif what == "file":
            edits.append(("file", draw(st.sampled_from(HF_FILES)), draw(st.sampled_from(FILE_KINDS))))
        else:
            value = draw(st.sampled_from([None, 3, [], "byte", "x" * 100000, "\x1e", {"a": 1}]))
            edits.append(("tokenizer", value, None))
    return model_type, edits


def _raw_file(path, kind: str, good: bytes, draw_bytes: bytes) -> None:
    import os

    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(path.parent / "nothing-here")
    else:
        path.write_bytes({"nested": b"[" * 100000 + b"]" * 100000, "truncate": good[: len(good) // 2],
                          "bytes": draw_bytes, "list": b"[1, 2]", "empty": b""}[kind])


def _apply(folder, files: dict, edits: list) -> None:
    from safetensors.torch import load, save

    for name, data in files.items():
        (folder / name).write_bytes(data)
    order = ("tensor", "name", "index", "tokenizer", "file")  # the file edits last: they may break what is read
    for edit in sorted(edits, key=lambda e: order.index(e[0])):
        weights = folder / "model.safetensors"
        if edit[0] in ("tensor", "name") and weights.is_file() and not weights.is_symlink():
            tensors = load(weights.read_bytes())
            names = sorted(tensors)
            name = names[edit[1] % len(names)]
            if edit[0] == "tensor":
                tensors[name] = _spoiled_tensor(edit[3], tensors[name])
            elif edit[2] in tensors or not edit[2]:
                tensors.pop(name)
            else:
                tensors[edit[2]] = tensors.pop(name)
            weights.write_bytes(save({k: v.contiguous() for k, v in tensors.items()}))
        elif edit[0] == "index" and weights.is_file() and not weights.is_symlink():
            names = sorted(load(weights.read_bytes()))
            weights.rename(folder / "model-1.safetensors")
            (folder / "link.safetensors").symlink_to(folder.parent / "outside.safetensors")
            values, form = edit[1], edit[2]
            doc = {"weight_map": {n: values[i % len(values)] if i < len(values) else "model-1.safetensors"
                                  for i, n in enumerate(names)}}
            data = json.dumps(doc).encode() if form == "map" else json.dumps({"weight_map": values}).encode()
            (folder / "model.safetensors.index.json").write_bytes(data if form != "bytes" else data[: len(data) // 2])
        elif edit[0] == "file":
            _raw_file(folder / edit[1], edit[2], files.get(edit[1], b"{}"), b"\xff\x00{" * 7)
        elif edit[0] == "tokenizer" and (folder / "tokenizer_config.json").is_file():
            doc = json.loads((folder / "tokenizer_config.json").read_text())
            (folder / "tokenizer_config.json").write_text(json.dumps({**doc, "depthwidth_fingerprint": edit[1]}))


def test_hostile_hf_folders(harness, fuzz_paths, stand_ins, hf_exports, tmp_path_factory, profile):
    import shutil

    root = tmp_path_factory.mktemp("fuzz-hf-folders")
    (root / "outside.safetensors").write_bytes(hf_exports["gpt2"]["model.safetensors"])

    def check(drawn) -> None:
        model_type, edits = drawn
        folder = root / "model"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        _apply(folder, hf_exports[model_type], edits)
        harness.check("hf folder", ["bench", "--hf-model", str(folder), "--hardware", "cpu"])
        harness.check("hf folder", ["train", "--init-from", str(folder), "--data", fuzz_paths["text"], "--steps", "1"])

    harness.fuzz(hf_folder_edits(hf_exports), check, profile=profile, scale=1)


def test_the_unchanged_hf_folders_are_accepted(harness, fuzz_paths, stand_ins, hf_exports, tmp_path):
    for model_type, files in hf_exports.items():
        folder = tmp_path / model_type
        folder.mkdir()
        _apply(folder, files, [])
        for argv in (["bench", "--hf-model", str(folder), "--hardware", "cpu"],
                     ["train", "--init-from", str(folder), "--data", fuzz_paths["text"], "--steps", "1"]):
            result = harness.run(argv)
            assert result.code == 0, (model_type, argv, result.stderr)
