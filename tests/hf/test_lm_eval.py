"""lm-evaluation-harness scores an exported model on our probe task through its own Python API
(`--model hf`, local files only), and the per-example log-likelihoods it reports equal ours within 1e-5;
its `acc` is our probe accuracy (the answer is the greedy continuation). Slow: the harness imports
`datasets`, `accelerate` and friends (about 15 s)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow
lm_eval = pytest.importorskip("lm_eval")

SPEC = "probe:recall:1@2000"
LIMIT = 40


@torch.no_grad()
def _ours(model, tokenizer, context: str, answer: str) -> tuple[float, bool]:
    """Sum of the answer tokens' log-probabilities after `context`, and whether each is the argmax."""
    prompt, target = tokenizer.encode(context).astype(np.int64), tokenizer.encode(answer).astype(np.int64)
    ids = torch.from_numpy(np.concatenate([prompt, target]))[None]  # (1, T)
    logp = model(ids)[0][0].log_softmax(-1)  # (T, V)
    rows = logp[len(prompt) - 1 : len(ids[0]) - 1]  # the positions that predict the answer
    picked = rows.gather(1, torch.from_numpy(target)[:, None]).sum().item()
    return picked, bool(torch.equal(rows.argmax(-1), torch.from_numpy(target)))


def test_lm_eval_log_likelihoods_equal_ours(tmp_path, monkeypatch, corpus_file, trainer):
    from depthwidth.bench.target import load_checkpoint_model
    from depthwidth.data.probes import parse_probe_spec, probe_test_set
    from depthwidth.data.tokenizers import ByteTokenizer
    from depthwidth.hf.export import export_run
    from depthwidth.shapes.shape import Shape
    from depthwidth.train.probe_eval import probe_accuracy

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    shape = Shape(n_layers=2, d_model=48, n_heads=4, vocab_size=256, max_seq_len=64)
    trainer(tmp_path / "run", shape, corpus=SPEC, steps=150, seq_len=64)
    wrote = export_run(tmp_path / "run", tmp_path / "hf")
    (task,) = wrote.tasks
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    out = simple_evaluate(model="hf", model_args=wrote.lm_eval_args() + ",device=cpu", tasks=[task],
                          task_manager=TaskManager(include_path=str(tmp_path / "hf" / "lm_eval_tasks")),
                          log_samples=True, limit=LIMIT, batch_size=1)
    samples = out["samples"][task]
    assert len(samples) == LIMIT
    model, tokenizer = load_checkpoint_model(tmp_path / "run").model, ByteTokenizer()
    worst = 0.0
    for s in samples:
        (ll, greedy), = s["filtered_resps"]
        mine, my_greedy = _ours(model, tokenizer, s["doc"]["context"], s["doc"]["answer"])
        worst = max(worst, abs(ll - mine))
        assert greedy == my_greedy and s["acc"] == int(my_greedy)
    acc = out["results"][task]["acc,none"]
    print(f"lm_eval {task}: {LIMIT} examples, acc {acc:.3f}, max |log-likelihood diff| {worst:.2e}")  # pytest -s
    assert worst <= 1e-5, f"max |log-likelihood diff| {worst:.2e}"
    examples = probe_test_set(parse_probe_spec(SPEC))[:LIMIT]
    assert [("\n" + e.prompt, e.answer) for e in examples] == [(s["doc"]["context"], s["doc"]["answer"])
                                                               for s in samples]
    ours = probe_accuracy(model, tokenizer=tokenizer, examples=examples)["recall"]
    counts = {d: sum(e.difficulty == d for e in examples) for d in ours}
    mean = sum(ours[d] * counts[d] for d in ours) / LIMIT
    assert math.isclose(acc, mean, abs_tol=1e-12)
