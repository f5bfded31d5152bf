"""`depthwidth calc` as a user runs it: a separate process, JSON keys and values, one-line errors."""

import json
import subprocess
import sys

import pytest

from depthwidth.shapes.memory import memory
from depthwidth.shapes.presets import PRESETS

LLAMA3_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
}


def calc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthwidth", "calc", *args], capture_output=True, text=True, timeout=60
    )


def calc_json(*args: str) -> dict:
    result = calc(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_json_keys_and_values_gpt2_small():
    out = calc_json("--preset", "gpt2-small")
    assert out["shape"]["n_layers"] == 12 and out["shape"]["d_model"] == 768 and out["shape"]["vocab_size"] == 50257
    assert set(out["shape"]) == set(PRESETS["gpt2-small"].shape.to_dict())
    p = out["params"]
    assert p["total"] == 124_439_808
    assert p["embedding"] == 50257 * 768
    assert p["non_embedding"] == 124_439_808 - 50257 * 768 - 1024 * 768 == 85_056_000
    assert p["per_layer"] == 12 * 768**2 + 13 * 768
    # Forward FLOPs per token, causal, T = 1024: 2 * (matmul weights incl. the head) + 2 * 2 * L * (T/2) * d.
    matmul_weights = 12 * 12 * 768**2 + 768 * 50257
    assert out["flops"]["forward_per_token"] == 2 * matmul_weights + 4 * 12 * 512 * 768
    assert out["flops"]["train_per_token"] == 3 * out["flops"]["forward_per_token"]
    # KV cache: 2 * L * n_kv_heads * head_dim * 2 bytes (bf16)
    assert out["memory"]["kv_cache_bytes_per_token"] == 2 * 12 * 12 * 64 * 2 == 36_864
    assert out["memory"]["kv_cache_bytes"] == 36_864 * 1024
    assert out["preset"]["published_params"] == 124_439_808


def test_json_memory_is_the_library_memory():
    out = calc_json("--preset", "llama-2-7b", "--seq-len", "2048", "--batch", "4", "--recompute", "selective",
                    "--zero", "1", "--dp", "8", "--train-precision", "fp32", "--attn-impl", "eager")
    expected = memory(PRESETS["llama-2-7b"].shape, seq_len=2048, micro_batch=4, recompute="selective",
                      zero_stage=1, dp=8, train_precision="fp32", attn_impl="eager", kv_batch=4, kv_context=2048)
    assert out["memory"]["activation_bytes_per_layer"] == expected.activation_bytes_per_layer
    assert out["memory"]["optimizer_bytes"] == expected.optimizer_bytes
    assert out["settings"]["zero_stage"] == 1 and out["settings"]["micro_batch"] == 4
    # GQA-free Llama-2-7B: 2 * 32 * 32 * 128 * 2 bytes = 512 KiB per token, x 4 x 2048 for the cache
    assert out["memory"]["kv_cache_bytes_per_token"] == 524_288
    assert out["memory"]["kv_cache_bytes"] == 524_288 * 4 * 2048


@pytest.mark.parametrize(
    "args, total",
    [
        (["--preset", "mistral-7b"], 7_241_732_096),
        (["--preset", "gpt2-small", "--layers", "24", "--width", "1024", "--heads", "16"], 354_823_168),
        (["--layers", "12", "--width", "768", "--heads", "12", "--bias", "all", "--tied"], 124_439_808),
        (["--layers", "12", "--width", "768", "--heads", "12"], 124_337_664),
        (["--shape", "L32-H4096-A32-KV8-F14336", "--ffn", "swiglu", "--norm", "rmsnorm", "--pos", "rope",
          "--vocab", "128256", "--untied", "--max-seq-len", "8192"], 8_030_261_248),
        (["--preset", "llama-2-7b", "--shape", "L32-H4096-A32-KV8-F14336"], 7_241_732_096),
    ],
)
def test_shape_sources(args, total):
    assert calc_json(*args)["params"]["total"] == total


def test_hf_config_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA3_8B_CONFIG))
    out = calc_json("--hf", str(path))
    assert out["params"]["total"] == 8_030_261_248
    assert out["memory"]["kv_cache_bytes_per_token"] == 131_072  # 128 KiB per token in bf16 with GQA 8


def test_list_presets():
    rows = calc_json("--list-presets")
    assert [r["name"] for r in rows] == list(PRESETS)
    by_name = {r["name"]: r for r in rows}
    assert by_name["qwen2.5-0.5b"]["params"] == 494_032_768
    text = calc("--list-presets")
    assert text.returncode == 0 and "pythia-160m" in text.stdout


def test_table_output():
    result = calc("--preset", "pythia-160m")
    assert result.returncode == 0, result.stderr
    for word in ("Parameters", "162,322,944", "FLOPs", "KV cache", "matches"):
        assert word in result.stdout


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "make_args, fragment",
    [
        (lambda t: ["--layers", "0", "--width", "768", "--heads", "12"], "--layers"),
        (lambda t: ["--layers", "-3", "--width", "768", "--heads", "12"], "must be a positive integer"),
        (lambda t: ["--layers", "two", "--width", "768", "--heads", "12"], "not an integer"),
        (lambda t: ["--layers", "2", "--width", "768", "--heads", "5"], "n_heads=5 does not divide d_model=768"),
        (lambda t: ["--layers", "2", "--width", "768", "--heads", "12", "--kv-heads", "5"], "n_kv_heads=5"),
        (lambda t: ["--preset", "gpt2-small", "--heads", "7"], "n_heads=7"),
        (lambda t: ["--layers", "2", "--width", "64", "--heads", "4", "--ffn", "tanh"], "invalid choice: 'tanh'"),
        (lambda t: ["--layers", "2", "--width", "64", "--heads", "4", "--norm", "batchnorm"], "--norm"),
        (lambda t: ["--preset", "gpt2-small", "--zero", "5"], "--zero"),
        (lambda t: ["--preset", "gpt2-smal"], "did you mean gpt2-small"),
        (lambda t: ["--preset", "gpt2-small", "--seq-len", "4096"], "seq_len=4096 exceeds max_seq_len=1024"),
        (lambda t: ["--shape", "L12-H768"], "lacks A"),
        (lambda t: ["--shape", "L12-H768-A12", "--layers", "6"], "--shape and --layers"),
        (lambda t: ["--preset", "gpt2-small", "--hf", "x.json"], "--preset and --hf"),
        (lambda t: ["--tied", "--untied", "--preset", "gpt2-small"], "not allowed with argument"),
        (lambda t: [], "no shape given"),
        (lambda t: ["--preset", "gpt2-small", "--bogus"], "unrecognized arguments: --bogus"),
        (lambda t: ["--hf", _write(t, "bad.json", '{"model_type": "llama",, }')], "bad.json: invalid JSON at line 1"),
        (lambda t: ["--hf", _write(t, "cut.json", json.dumps(LLAMA3_8B_CONFIG)[:90])], "cut.json: invalid JSON"),
        (lambda t: ["--hf", _write(t, "bert.json", '{"model_type": "bert"}')], "model_type 'bert' is not supported"),
        (lambda t: ["--hf", _write(t, "nolayers.json", json.dumps(
            {k: v for k, v in LLAMA3_8B_CONFIG.items() if k != "num_hidden_layers"}))], "'num_hidden_layers'"),
        (lambda t: ["--hf", str(t / "absent.json")], "absent.json"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, make_args, fragment):
    result = calc(*make_args(tmp_path), "--json")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]
    assert lines[0].startswith("depthwidth calc: error:")


def test_calc_json_does_not_import_torch():
    code = (
        "import json, sys\n"
        "from depthwidth.cli import main\n"
        "rc = main(['calc', '--preset', 'gpt2-small', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'matplotlib', 'scipy'))\n"
        "sys.stderr.write(json.dumps(heavy))\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert json.loads(result.stdout)["params"]["total"] == 124_439_808
    assert json.loads(result.stderr) == []
