"""Hostile Hugging Face folders, made from small real exports of every class we import (gpt2, llama,
mistral, qwen2, gpt_neox): a shard index whose values are not file names inside the folder, tensors of
the wrong name, dtype, size or value, config/weights/tokenizer files that are devices, FIFOs or folders,
and strings from files long enough to flood a message. Each is one line (`UserError`; exit 2 from
`bench --hf-model`, `train --init-from` and a study's `init_from`) within seconds and bounded memory.
And the writing side: a full disk, another filesystem and a read-only target for `export`."""

from __future__ import annotations

import contextlib
import re
import errno
import json
import os
import resource
import shutil
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file, save_file

from depthwidth.errors import UserError
from depthwidth.hfio.load import read_hf_checkpoint
from depthwidth.shapes.shape import Shape

pytest.importorskip("transformers")

GPT2 = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
ROPE = dict(n_layers=2, d_model=32, n_heads=4, vocab_size=256, max_seq_len=32, pos="rope")
OTHERS = {
    "llama": Shape(**ROPE, n_kv_heads=2, ffn="swiglu", norm="rmsnorm", bias="none"),
    "qwen2": Shape(**ROPE, n_kv_heads=2, ffn="swiglu", norm="rmsnorm", bias="qkv"),
    "gpt_neox": Shape(**ROPE),
}
WEIGHTS, INDEX, TOKENIZER_CONFIG = "model.safetensors", "model.safetensors.index.json", "tokenizer_config.json"
SHARD = "model-00001-of-00001.safetensors"
#: what one hostile folder may cost: seconds, and growth of the address space (a device read whole is GBs)
SECONDS, ADDRESS_SPACE = 5.0, 2 * 1024**3


@pytest.fixture(scope="module")
def exports(tmp_path_factory, corpus_file, trainer) -> dict[str, Path]:
    """Our exports: a trained GPT-2 run, and llama, qwen2 and GPT-NeoX models; mistral is the llama
    export relabelled (the same tensors)."""
    from depthwidth.data.tokenizers import ByteTokenizer
    from depthwidth.hf.export import export_model, export_run
    from depthwidth.model.transformer import Transformer

    root = tmp_path_factory.mktemp("hostile")
    trainer(root / "run", GPT2, corpus=corpus_file, steps=2)
    export_run(root / "run", root / "gpt2")
    for model_type, shape in OTHERS.items():
        torch.manual_seed(0)
        export_model(Transformer(shape).state_dict(), shape, tokenizer=ByteTokenizer(), out_dir=root / model_type)
    shutil.copytree(root / "llama", root / "mistral")
    config = json.loads((root / "mistral" / "config.json").read_text())
    config.update(model_type="mistral", architectures=["MistralForCausalLM"])
    (root / "mistral" / "config.json").write_text(json.dumps(config))
    return {name: root / name for name in ("gpt2", *OTHERS, "mistral")}


@pytest.fixture
def folder(exports, tmp_path):
    """`folder(model_type)`: a copy of that export to spoil."""
    def copy(model_type: str = "gpt2") -> Path:
        return Path(shutil.copytree(exports[model_type], tmp_path / model_type))

    return copy


@contextlib.contextmanager
def bounded():
    """The block must end within SECONDS, its address space capped ADDRESS_SPACE above its start (an
    allocation of a device's endless bytes fails at once instead of taking the machine)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = psutil.Process().memory_info().vms + ADDRESS_SPACE
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    start = time.monotonic()
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert time.monotonic() - start < SECONDS


# ---- how a folder is spoiled --------------------------------------------------------------------
def _tensors(change):
    def edit(d: Path) -> None:
        tensors = load_file(d / WEIGHTS)
        change(tensors)
        save_file(tensors, d / WEIGHTS)
    return edit


def _set(name: str, value: torch.Tensor):
    return _tensors(lambda t: t.__setitem__(name, value))


def _dtype(dtype: torch.dtype):
    return _tensors(lambda t: t.__setitem__("transformer.wte.weight", t["transformer.wte.weight"].to(dtype)))


def _fill(value: float):
    return _tensors(lambda t: t["transformer.h.1.mlp.c_fc.weight"].view(-1).__setitem__(7, value))


def _sharded(value_of):
    """The weights as one shard, the index mapping every tensor to `value_of(tensor name)`."""
    def edit(d: Path) -> None:
        names = list(load_file(d / WEIGHTS))
        (d / WEIGHTS).rename(d / SHARD)
        (d / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {n: value_of(n) for n in names}}))
    return edit


def _index(text: str):
    def edit(d: Path) -> None:
        _sharded(lambda n: SHARD)(d)
        (d / INDEX).write_text(text)
    return edit


def _link_out(d: Path) -> None:
    _sharded(lambda n: SHARD)(d)
    (d / SHARD).rename(d.parent / "elsewhere.safetensors")
    (d / SHARD).symlink_to(d.parent / "elsewhere.safetensors")


def _outside(d: Path) -> None:
    other = d.parent / "other"
    other.mkdir()
    shutil.copy(d / WEIGHTS, other / WEIGHTS)
    _sharded(lambda n: "../other/model.safetensors")(d)


def _two_shards(d: Path) -> None:
    _sharded(lambda n: SHARD)(d)
    shutil.copy(d / SHARD, d / "model-2.safetensors")
    index = json.loads((d / INDEX).read_text())
    index["weight_map"]["transformer.wte.weight"] = "model-2.safetensors"
    (d / INDEX).write_text(json.dumps(index))


def _replace(name: str, how: str):
    """The file `name` replaced by a link to /dev/zero, a folder, a FIFO or a dangling link."""
    def edit(d: Path) -> None:
        path = d / name
        if path.exists():
            path.unlink()
        {"devzero": lambda: path.symlink_to("/dev/zero"), "folder": path.mkdir, "fifo": lambda: os.mkfifo(path),
         "dangling": lambda: path.symlink_to(d / "nothing")}[how]()
    return edit


def _write(name: str, data: bytes):
    def edit(d: Path) -> None:
        (d / name).write_bytes(data)
    return edit


def _fingerprint(d: Path) -> None:
    config = json.loads((d / TOKENIZER_CONFIG).read_text())
    (d / TOKENIZER_CONFIG).write_text(json.dumps({**config, "depthwidth_fingerprint": "x" * 100_000}))


NESTED = b"[" * 200_000 + b"]" * 200_000
CASES = {  # id: (model_type, spoil, what the one line says)
    "index value not a string": ("gpt2", _sharded(lambda n: 3), r"weight_map\['[\w.]+'\] = 3; expected a shard file "
                                                               r"name \(a string\)"),
    "index value a list": ("llama", _sharded(lambda n: [SHARD]), r"weight_map\['[\w.]+'\] = \['model-"),
    "index without weight_map": ("gpt2", _index('{"metadata": {}}'), r"'weight_map' = None; expected an object of "
                                                                      r"tensor name -> shard file name"),
    "index not an object": ("gpt2", _index("[1, 2]"), r"index.json: expected a JSON object at the top level"),
    "index nested": ("gpt2", _index(NESTED.decode()), r"index.json: unreadable JSON \(RecursionError"),
    "index a device": ("gpt2", lambda d: (_sharded(lambda n: SHARD)(d), _replace(INDEX, "devzero")(d)),
                       r"index.json: a character device, not a regular file"),
    "shard outside": ("gpt2", _outside, r"shard '../other/model.safetensors' is not a file name inside the model "
                                        r"folder \(no absolute path, no '..'\)"),
    "shard absolute": ("gpt2", _sharded(lambda n: "/etc/passwd"), r"shard '/etc/passwd' is not a file name inside"),
    "shard a link out": ("gpt2", _link_out, r"shard 'model-00001-of-00001.safetensors' is a link to .*elsewhere"
                                           r".safetensors, outside the model folder"),
    "shard missing": ("gpt2", _sharded(lambda n: "absent.safetensors"), r"lists 'absent.safetensors', which is not "
                                                                        r"in the folder"),
    "shard a folder": ("gpt2", lambda d: (_sharded(lambda n: "sub")(d), (d / "sub").mkdir()),
                       r"sub is a folder, not a safetensors file"),
    "tensor in two shards": ("gpt2", _two_shards, r"tensor '[\w.]+' is in both model-"),
    "llama k_proj size": ("llama", _set("model.layers.0.self_attn.k_proj.weight", torch.zeros(8, 31)),
                          r"tensor 'model.layers.0.self_attn.k_proj.weight' has size \(8, 31\), which does not fit "
                          r"the config's shape L2-H32-A4-KV2 \(expected \(16, 32\), our blocks.0.attn.qkv.weight\)"),
    "mistral v_proj size": ("mistral", _set("model.layers.1.self_attn.v_proj.weight", torch.zeros(17, 32)),
                            r"tensor 'model.layers.1.self_attn.v_proj.weight' has size \(17, 32\)"),
    "qwen2 q bias size": ("qwen2", _set("model.layers.0.self_attn.q_proj.bias", torch.zeros(31)),
                          r"tensor 'model.layers.0.self_attn.q_proj.bias' has size \(31,\)"),
    "gpt_neox qkv size": ("gpt_neox", _set("gpt_neox.layers.0.attention.query_key_value.weight", torch.zeros(95, 32)),
                          r"tensor 'gpt_neox.layers.0.attention.query_key_value.weight' has size \(95, 32\), which "
                          r"does not fit the config's shape L2-H32-A4 \(expected \(96, 32\)"),
    "gpt2 c_attn size": ("gpt2", _set("transformer.h.0.attn.c_attn.weight", torch.zeros(32, 95)),
                         r"tensor 'transformer.h.0.attn.c_attn.weight' has size \(32, 95\)"),
    "a 1-d tensor for a matrix": ("llama", _set("model.layers.0.mlp.up_proj.weight", torch.zeros(10)),
                                  r"tensor 'model.layers.0.mlp.up_proj.weight' has size \(10,\)"),
    "missing tensor": ("gpt_neox", _tensors(lambda t: t.pop("gpt_neox.final_layer_norm.bias")),
                       r"the weights lack tensor 'gpt_neox.final_layer_norm.bias'"),
    "bool weights": ("gpt2", _dtype(torch.bool), r"tensor 'transformer.wte.weight' is bool; weights must be floating "
                                                 r"point"),
    "int64 weights": ("gpt2", _dtype(torch.int64), r"tensor 'transformer.wte.weight' is int64; weights must be"),
    "NaN weights": ("gpt2", _fill(float("nan")), r"tensor 'transformer.h.1.mlp.c_fc.weight' holds NaN or infinite "
                                                 r"values"),
    "infinite weights": ("gpt2", _fill(float("inf")), r"tensor 'transformer.h.1.mlp.c_fc.weight' holds NaN or "
                                                      r"infinite values"),
    "a long tensor name": ("gpt2", _set("x" * 100_000, torch.zeros(1)),
                           r"1 tensor\(s\) this config's class does not have, e.g. 'x{70,80}\.\.\.; the weights"),
    "weights a device": ("gpt2", _replace(WEIGHTS, "devzero"), r"model.safetensors is a character device, not a "
                                                               r"safetensors file"),
    "weights a folder": ("gpt2", _replace(WEIGHTS, "folder"), r"model.safetensors is a folder, not a safetensors"),
    "weights a FIFO": ("gpt2", _replace(WEIGHTS, "fifo"), r"model.safetensors is a FIFO \(named pipe\), not a "
                                                          r"safetensors file"),
    "weights a dangling link": ("gpt2", _replace(WEIGHTS, "dangling"), r"model.safetensors is a broken symbolic "
                                                                       r"link, not a safetensors file"),
    "weights header too large": ("gpt2", _write(WEIGHTS, (2**40).to_bytes(8, "little") + b"{}"),
                                 r"model.safetensors is not a readable safetensors file \(a header of "
                                 r"1,099,511,627,776 bytes"),
    "weights too short": ("gpt2", _write(WEIGHTS, b"\x01"), r"not a readable safetensors file \(1 bytes, shorter"),
    "config a device": ("gpt2", _replace("config.json", "devzero"), r"config.json is a character device, not a file"),
    "config a folder": ("gpt2", _replace("config.json", "folder"), r"config.json is a folder, not a file"),
    "config a FIFO": ("gpt2", _replace("config.json", "fifo"), r"config.json is a FIFO \(named pipe\), not a file"),
    "config too large": ("gpt2", _write("config.json", b" " * (17 * 1024**2)), r"config.json: too large for a config"),
    "tokenizer config nested": ("gpt2", _write(TOKENIZER_CONFIG, NESTED),
                                r"tokenizer_config.json: unreadable JSON \(RecursionError"),
    "tokenizer config a device": ("gpt2", _replace(TOKENIZER_CONFIG, "devzero"),
                                  r"tokenizer_config.json: a character device, not a regular file; expected a "
                                  r"tokenizer config file"),
    "tokenizer config a FIFO": ("gpt2", _replace(TOKENIZER_CONFIG, "fifo"),
                                r"tokenizer_config.json: a FIFO \(named pipe\), not a regular file"),
    "tokenizer config a folder": ("llama", _replace(TOKENIZER_CONFIG, "folder"),
                                  r"tokenizer_config.json: a folder, not a regular file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_folder_is_one_line(case, folder):
    model_type, spoil, message = CASES[case]
    d = folder(model_type)
    spoil(d)
    with bounded(), pytest.raises(UserError, match=message) as info:
        read_hf_checkpoint(d, exact=False)
    assert "\n" not in str(info.value) and len(str(info.value)) < 600, str(info.value)


@pytest.mark.parametrize("case", ["index value not a string", "llama k_proj size", "gpt_neox qkv size",
                                  "tokenizer config nested", "tokenizer config a FIFO", "weights a device",
                                  "config a device", "shard outside", "int64 weights"])
def test_the_commands_say_it_in_one_line(case, folder, corpus_file, tmp_path, cli_error):
    model_type, spoil, message = CASES[case]
    d = folder(model_type)
    spoil(d)
    for argv in (["bench", "--hf-model", d, "--prompt-lens", "8", "--contexts", "8", "--no-throughput", "--repeat",
                  "1", "--warmup", "0", "--hardware", "cpu"],
                 ["train", "--init-from", d, "--data", corpus_file, "--steps", "1", "--out", tmp_path / "run"]):
        with bounded():
            line = cli_error([str(a) for a in argv])
        assert line.startswith(f"depthwidth {argv[0]}: error: ") and re.search(message, line), line
    assert not (tmp_path / "run").exists()


def test_a_studys_init_from_with_a_hostile_index_is_one_line(folder, corpus_file, tmp_path, cli_error):
    d = folder("gpt2")
    _outside(d)
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "hostile"\nhardware = "cpu"\n[data]\ncorpus = "{corpus_file}"\nseq_len = 32\n'
                    f'batch_size = 4\n[train]\nsteps = 2\ninit_from = "{d}"\n[lr]\ngrid = [1e-3]\n'
                    '[bench]\nenabled = false\n[[shape]]\nn_layers = 2\nd_model = 32\nn_heads = 2\n')
    line = cli_error(["study", "validate", str(spec)])
    assert "shard '../other/model.safetensors' is not a file name inside the model folder" in line, line


def test_nothing_is_opened_before_every_shard_is_checked(folder, monkeypatch):
    from depthwidth.hfio import weights

    d = folder("gpt2")
    (d / WEIGHTS).rename(d / SHARD)
    names = list(load_file(d / SHARD))
    (d / INDEX).write_text(json.dumps({"weight_map": {**{n: SHARD for n in names[1:]}, names[0]: "/etc/passwd"}}))
    opened = []
    monkeypatch.setattr(weights, "_file_header", lambda file: opened.append(file))
    with pytest.raises(UserError, match="shard '/etc/passwd' is not a file name inside the model folder"):
        read_hf_checkpoint(d)
    assert opened == []


def test_half_precision_weights_and_the_hub_cache_layout_are_read(folder, exports, tmp_path):
    d = folder("llama")
    _tensors(lambda t: t.update({k: v.to(torch.bfloat16) for k, v in t.items()}))(d)
    state = read_hf_checkpoint(d).state
    assert all(t.dtype == torch.float32 for t in state.values())
    # the hub cache: snapshots/<revision>/ holds links into the repo's blobs/, sharded here
    repo = tmp_path / "models--tiny" / "snapshots" / "abc123"
    blobs = tmp_path / "models--tiny" / "blobs"
    blobs.mkdir(parents=True)
    repo.mkdir(parents=True)
    _sharded(lambda n: SHARD)(folder_copy := Path(shutil.copytree(exports["gpt2"], tmp_path / "plain")))
    for item in folder_copy.iterdir():
        shutil.copy(item, blobs / f"blob-{item.name}")
        (repo / item.name).symlink_to(Path("../../blobs") / f"blob-{item.name}")
    assert read_hf_checkpoint(repo).shape == read_hf_checkpoint(exports["gpt2"]).shape


def test_a_long_fingerprint_is_cut_in_the_message(folder, corpus_file, tmp_path, cli_error):
    d = folder("gpt2")
    _fingerprint(d)
    line = cli_error(["train", "--init-from", str(d), "--data", str(corpus_file), "--steps", "1", "--seq-len", "32",
                      "--out", str(tmp_path / "run")])
    assert f"init_from {d.resolve()} was trained with tokenizer xxx" in line, line
    assert "x... (100,000 characters), but this run" in line, line
    assert len(line) < 600


# ---- writing: modes, a full disk, another filesystem, a read-only target -------------------------
def test_every_exported_file_has_the_same_mode(exports):
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in exports["gpt2"].iterdir()}
    assert set(modes.values()) == {0o666 & ~umask}, modes


def _full_disk(monkeypatch, *, after: int = 100):
    """Writing the weights fails with ENOSPC after `after` bytes, as on a full disk."""
    from depthwidth.hf import export

    def write(path, tensors):
        Path(path).write_bytes(b"\0" * after)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(export, "write_weights", write)


def test_an_export_onto_a_full_disk_is_one_line_and_leaves_nothing(exports, tmp_path, monkeypatch, cli_error):
    run = exports["gpt2"].parent / "run"
    _full_disk(monkeypatch)
    out = tmp_path / "new" / "hf"
    assert cli_error(["export", str(run), "-o", str(out)]) == \
        f"depthwidth export: error: {out}: cannot write the model (No space left on device); nothing of it was " \
        "left there"
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert "No space left on device" in cli_error(["export", str(run), "-o", str(tmp_path / "empty")])
    assert list((tmp_path / "empty").iterdir()) == []
    kept = Path(shutil.copytree(exports["gpt2"], tmp_path / "kept"))
    before = {p.name: p.read_bytes() for p in kept.iterdir()}
    assert "No space left on device" in cli_error(["export", str(run), "-o", str(kept), "--force"])
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before  # the earlier export as it was


def test_an_export_onto_another_filesystem_is_written(exports, tmp_path, monkeypatch, capsys):
    """An empty mount point as the target: a rename between it and anywhere outside fails (EXDEV)."""
    from depthwidth.cli import main

    mount = tmp_path / "mnt"
    mount.mkdir()
    replace = os.replace

    def across(src, dst, **kw):
        if Path(src).is_relative_to(mount) != Path(dst).is_relative_to(mount):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(src), None, str(dst))
        return replace(src, dst, **kw)

    monkeypatch.setattr(os, "replace", across)
    assert main(["export", str(exports["gpt2"].parent / "run"), "-o", str(mount)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in mount.iterdir()) == sorted(p.name for p in exports["gpt2"].iterdir())
    assert read_hf_checkpoint(mount).shape == GPT2


def test_a_read_only_target_is_one_line(exports, tmp_path, monkeypatch, cli_error):
    import tempfile

    def read_only(*args, dir=None, **kw):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    (tmp_path / "ro").mkdir()
    assert cli_error(["export", str(exports["gpt2"].parent / "run"), "-o", str(tmp_path / "ro")]) == \
        f"depthwidth export: error: {tmp_path / 'ro'}: cannot write the model (Read-only file system); nothing of " \
        "it was left there"
    assert list((tmp_path / "ro").iterdir()) == []


def test_the_leftover_of_a_killed_export_is_cleaned(exports, tmp_path):
    from depthwidth.files import STAGING_PREFIX
    from depthwidth.hf.export import export_run

    out = tmp_path / "hf"
    leftover = out / f"{STAGING_PREFIX}999999999-abc"  # no such process
    leftover.mkdir(parents=True)
    (leftover / WEIGHTS).write_bytes(b"half")
    export_run(exports["gpt2"].parent / "run", out)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in exports["gpt2"].iterdir())
