"""The commands end to end: `depthwidth train` -> `export` -> transformers loads it -> `train --init-from`
continues it, `bench --hf-model` times it, `export --probe-tasks` writes harness tasks; and every refusal
(a shape no class holds, a folder without config.json, a pickle checkpoint, a non-empty target) is one
line on stderr with exit status 2, leaving nothing behind."""

from __future__ import annotations

import json

import pytest
import torch

from depthwidth.cli import main

transformers = pytest.importorskip("transformers")

QUICK = ["--seq-len", "32", "--batch-size", "4", "--threads", "1", "--eval-windows", "4", "--peak-flops", "1e11"]


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_exit_2(capsys, *argv) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture
def char_run(tmp_path, corpus_file, capsys):
    code, out, err = _run(capsys, "train", "--data", corpus_file, "--tokenizer", "char", "--shape", "L2-H32-A2",
                          "--steps", "6", *QUICK, "--out", tmp_path / "run", "--json")
    assert code == 0, err
    return tmp_path / "run", json.loads(out)


def test_train_export_load_and_continue(char_run, tmp_path, corpus_file, capsys):
    run, trained = char_run
    code, out, err = _run(capsys, "export", run, "-o", tmp_path / "hf", "--json")
    assert code == 0, err
    wrote = json.loads(out)
    assert wrote["class_name"] == "GPT2LMHeadModel" and wrote["tokenizer"] == "char" and wrote["finished"]
    assert wrote["files"] == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert model.config.vocab_size == trained["vocab_size"] == trained["shape"]["vocab_size"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tokenizer("print(x)\n", add_special_tokens=False)["input_ids"] == tokenizer.encode("print(x)\n")
    code, out, err = _run(capsys, "train", "--data", corpus_file, "--tokenizer", "char", "--init-from",
                          tmp_path / "hf", "--steps", "2", *QUICK, "--out", tmp_path / "run2", "--json")
    assert code == 0, err
    continued = json.loads(out)
    assert continued["shape"] == trained["shape"]  # the checkpoint's shape, vocabulary and context included
    assert continued["config"]["init_from"] == str((tmp_path / "hf").resolve())


def test_bench_times_a_hugging_face_folder(char_run, tmp_path, capsys):
    run, _ = char_run
    assert _run(capsys, "export", run, "-o", tmp_path / "hf")[0] == 0
    code, out, err = _run(capsys, "bench", "--hf-model", tmp_path / "hf", "--prompt-lens", "8", "--contexts", "8",
                          "--no-throughput", "--repeat", "1", "--warmup", "0", "--threads", "1",
                          "--hardware", "h100-sxm", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["target"] == f"{tmp_path / 'hf'} (gpt2)" and data["shape"]["n_layers"] == 2
    assert [p["kind"] for p in data["latency"]] == ["prefill", "decode"]
    assert all(p["seconds"]["median"] > 0 and p["predicted_s"] > 0 for p in data["latency"])


def test_a_shape_no_class_holds_is_refused_before_anything_is_written(tmp_path, corpus_file, capsys):
    code, _, err = _run(capsys, "train", "--data", corpus_file, "--shape", "L2-H32-A2", "--norm", "rmsnorm",
                        "--steps", "2", *QUICK, "--out", tmp_path / "run")
    assert code == 0, err
    err = _one_line_exit_2(capsys, "export", tmp_path / "run", "-o", tmp_path / "hf")
    assert err == ("depthwidth export: error: cannot export L2-H32-A2: norm='rmsnorm'; GPT2LMHeadModel (chosen for "
                   "pos='learned') needs norm='layernorm', and no Hugging Face class holds this shape exactly")
    assert not (tmp_path / "hf").exists()


def test_folders_without_config_or_with_a_pickle_are_one_line(tmp_path, corpus_file, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv in (("train", "--data", corpus_file, "--init-from", empty, "--steps", "2", *QUICK),
                 ("bench", "--hf-model", empty)):
        assert "has no config.json; a Hugging Face model folder holds config.json" in _one_line_exit_2(capsys, *argv)
    pickled = tmp_path / "pickled"
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=256, n_embd=32, n_layer=1, n_head=2,
                                                                 n_positions=32))
    model.save_pretrained(pickled)
    (pickled / "model.safetensors").unlink()
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    capsys.readouterr()  # transformers' own progress output
    for argv in (("train", "--data", corpus_file, "--init-from", pickled, "--steps", "2", *QUICK),
                 ("bench", "--hf-model", pickled)):
        assert "pytorch_model.bin is a pickle checkpoint, which is never loaded" in _one_line_exit_2(capsys, *argv)


def test_usage_mistakes_are_one_line(char_run, tmp_path, capsys):
    run, _ = char_run
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    assert "is not empty" in _one_line_exit_2(capsys, "export", run, "-o", tmp_path / "full")
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"
    assert "give RUN_DIR" in _one_line_exit_2(capsys, "export", "-o", tmp_path / "x")
    assert "checkpoint nowhere does not exist" in _one_line_exit_2(capsys, "export", "nowhere", "-o", tmp_path / "y")


def test_probe_tasks_are_written_for_the_harness(tmp_path, capsys):
    code, out, err = _run(capsys, "export", "--probe-tasks", "recall", "probe:multihop:1,2", "-o", tmp_path / "t",
                          "--json")
    assert code == 0, err
    assert json.loads(out)["tasks"] == ["depthwidth_recall", "depthwidth_multihop_1_2"]
    yaml = (tmp_path / "t" / "depthwidth_multihop_1_2.yaml").read_text()
    assert "output_type: loglikelihood" in yaml and 'target_delimiter: ""' in yaml
    assert f'test: "{(tmp_path / "t" / "depthwidth_multihop_1_2.jsonl").resolve()}"' in yaml
    rows = [json.loads(line) for line in (tmp_path / "t" / "depthwidth_multihop_1_2.jsonl").read_text().splitlines()]
    assert {r["difficulty"] for r in rows} == {1, 2} and all(r["context"].startswith("\n") for r in rows)
    assert "unknown" not in _one_line_exit_2(capsys, "export", "--probe-tasks", "nope", "-o", tmp_path / "u")
