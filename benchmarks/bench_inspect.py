"""Time and peak memory of `depthwidth inspect --hf-model` on a ~100M-parameter checkpoint made here.

A GPT-2-class model (12 layers, d_model 768, 12 heads, 1024 positions, vocabulary 16,384: about 98.5M
parameters with tied embeddings) with random weights is built by `transformers` and saved with
`save_pretrained` (safetensors) into a temporary folder, with a byte-level BPE tokenizer trained by
`tokenizers` on the text it is inspected on (CPython's own pydoc topics, about 40 KB here; nothing is
downloaded). `depthwidth inspect --hf-model DIR --text FILE --json` then runs as a separate process, timed
wall clock; its peak resident memory is the child's `ru_maxrss`. Random weights make every block about
equally (un)important (skipping one may even lower the loss), so the greedy effective-depth search runs
close to its worst case (it removes nearly every block): an upper bound for a trained model of this size
with the same windows. A second process times the layer report without the greedy search (the Python API,
`layer_report(..., greedy=False)`, on the same windows): every other measurement, the lower bound.

Then the refusal: a folder holding only the config.json of a Llama-2-70B-sized model is inspected, and
the command must end with exit status 2 and one line on stderr (the memory check of the HF loader,
`depthwidth.hfio.load`, runs before any weight is read).

    python benchmarks/bench_inspect.py [--windows 4] [--threads 2]

Windows are 256 tokens (`depthwidth.diagnose.inspect.DEFAULT_HF_SEQ_LEN`).

Exit status 1 when the inspection fails or the refusal is not one line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOCAB = 16_384
#: the child that times the layer report alone: the same model, tokenizer and windows as `inspect --hf-model`
REPORT_ONLY = """
import json
import numpy as np
from transformers import AutoTokenizer
from depthwidth.diagnose.inspect import BATCH, DEFAULT_HF_SEQ_LEN, text_windows
from depthwidth.diagnose.layers import layer_report
from depthwidth.hfio.load import load_hf_model
folder, text, windows = sys.argv[1], open(sys.argv[2], encoding="utf-8").read(), int(sys.argv[3])
model, _ = load_hf_model(folder)
tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"])
x, y = text_windows(ids, seq_len=min(DEFAULT_HF_SEQ_LEN, model.shape.max_seq_len), windows=windows, source="text")
print(json.dumps(layer_report(model, inputs=x, targets=y, batch_size=BATCH, greedy=False).to_dict()))
"""


def text_file(folder: Path) -> Path:
    from pydoc_data.topics import topics

    path = folder / "text.txt"
    path.write_text("".join(topics[k] for k in sorted(topics))[:40_000], encoding="utf-8")
    return path


def build_checkpoint(folder: Path, text: Path) -> int:
    """Save the random GPT-2-class model and its tokenizer in `folder`; returns the parameter count."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([str(text)], trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                               show_progress=False))
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=768, n_layer=12, n_head=12, n_positions=1024,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(folder, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def refusal(folder: Path, text: Path) -> tuple[int, str]:
    """(exit status, stderr) of inspecting a 70B-sized config with no weights."""
    folder.mkdir()
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 8192,
              "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64,
              "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "depthwidth", "inspect", "--hf-model", str(folder), "--text",
                           str(text)], capture_output=True, text=True)
    return done.returncode, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=4, help="windows of the text (default 4)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the inspection (default 2)")
    args = parser.parse_args()
    print(f"uptime before: {os.getloadavg()[0]:.2f} (1-minute load)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = text_file(tmp)
        ckpt = tmp / "gpt2-100m"
        start = time.perf_counter()
        params = build_checkpoint(ckpt, text)
        print(f"built {params:,} parameters (GPT-2 class, 12 x 768, vocab {VOCAB:,}) in "
              f"{time.perf_counter() - start:.1f} s; safetensors "
              f"{sum(f.stat().st_size for f in ckpt.glob('*.safetensors')) / 2**20:,.0f} MiB")
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        prefix = f"import torch, sys; torch.set_num_threads({args.threads}); "
        cli = [sys.executable, "-c", prefix + "from depthwidth.cli import main; sys.exit(main(sys.argv[1:]))",
               "inspect", "--hf-model", str(ckpt), "--text", str(text), "--windows", str(args.windows), "--json"]
        report_only = [sys.executable, "-c", prefix + REPORT_ONLY, str(ckpt), str(text), str(args.windows)]
        for name, cmd in (("depthwidth inspect --hf-model", cli), ("layer report without the greedy search",
                                                                     report_only)):
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: KiB; the largest child
            if done.returncode != 0:
                print(f"{name} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
                return 1
            out = json.loads(done.stdout)
            print(f"{name}: {wall:.1f} s wall, peak RSS (largest child so far) {peak / 2**30:.2f} GiB, "
                  f"{args.threads} thread(s); {out['windows']} windows, {out['tokens']:,} tokens; loss "
                  f"{out['loss']:.4f}; effective depth {out['effective_depth']} of {out['n_layers']} "
                  f"({len(out['removed'])} removed)")
        code, err = refusal(tmp / "llama-70b-config", text)
        lines = err.strip().splitlines()
        ok = code == 2 and len(lines) == 1 and "Traceback" not in err
        print(f"refusal of a 70B config: exit {code}, {len(lines)} line(s): {lines[0] if lines else ''}")
    print(f"uptime after: {os.getloadavg()[0]:.2f} (1-minute load)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
