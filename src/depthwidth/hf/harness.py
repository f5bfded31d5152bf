"""Our probe tasks as lm-evaluation-harness task configs, so any Hugging Face model can be scored on them.

One probe spec (`multihop`, `probe:recall:2,4,8`, ...) becomes `depthwidth_<name>.jsonl` (its test
examples: `context` = "\\n" + prompt, `answer`, `probe`, `difficulty`) and `depthwidth_<name>.yaml`:

    output_type: loglikelihood, doc_to_text: "{{context}}", doc_to_target: "{{answer}}", target_delimiter: ""
    metric_list: acc (the answer is the greedy continuation: lm_eval's `is_greedy`) and perplexity

`acc` is exactly our probe accuracy (`depthwidth.train.probe_eval`: every answer token is the argmax
after the prompt, teacher-forced); the per-example log-likelihood is the sum of the answer tokens'
log-probabilities. Run them with

    lm_eval --model hf --model_args pretrained=DIR,dtype=float32 --include_path TASKS --tasks depthwidth_multihop

The YAML is written by hand (JSON strings are YAML scalars), so depthwidth needs no YAML library; the
data file is named by its absolute path, as `datasets` resolves relative paths against the working folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from depthwidth.data.probes import DENSE_PROBES, PROBE_PREFIX, parse_probe_spec, probe_test_set
from depthwidth.errors import UserError

TASK_PREFIX = "depthwidth_"


def task_name(spec: str) -> str:
    """'probe:recall:2,4' -> 'depthwidth_recall_2_4': the harness names tasks with word characters."""
    body = spec[len(PROBE_PREFIX):] if spec.startswith(PROBE_PREFIX) else spec
    return TASK_PREFIX + re.sub(r"\W+", "_", body).strip("_")


def _yaml(name: str, data: Path) -> str:
    lines = [
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {json.dumps(str(data))}",
        "test_split: test",
        "output_type: loglikelihood",
        'doc_to_text: "{{context}}"',
        'doc_to_target: "{{answer}}"',
        'target_delimiter: ""',
        "metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    higher_is_better: true",
        "  - metric: perplexity",
        "    aggregation: perplexity",
        "    higher_is_better: false",
        "metadata:",
        "  version: 1.0",
    ]
    return "\n".join(lines) + "\n"


def write_harness_tasks(specs: list[str], out_dir: str | os.PathLike, *,
                        final_dir: str | os.PathLike | None = None) -> list[str]:
    """Write one task (YAML + JSONL of its test examples) per probe spec into `out_dir`; returns the
    task names. The YAML names its data in `final_dir` (default `out_dir`), where the files will be
    used. A bad spec raises UserError before anything is written."""
    probes = [(task_name(s), parse_probe_spec(s if s.startswith(PROBE_PREFIX) else PROBE_PREFIX + s))
              for s in specs]
    for _, probe in probes:
        if probe.name in DENSE_PROBES:
            raise UserError(f"probe {probe.name!r} has a target at every position; an lm-evaluation-harness task "
                            "scores one continuation per example, so it cannot be written as one")
    folder = Path(out_dir).resolve()
    final = Path(final_dir).resolve() if final_dir is not None else folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, probe in probes:
        data = folder / f"{name}.jsonl"
        rows = [{"context": "\n" + ex.prompt, "answer": ex.answer, "probe": ex.probe, "difficulty": ex.difficulty}
                for ex in probe_test_set(probe)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (folder / f"{name}.yaml").write_text(_yaml(name, final / data.name), encoding="utf-8")
    return [name for name, _ in probes]


__all__ = ["TASK_PREFIX", "task_name", "write_harness_tasks"]
