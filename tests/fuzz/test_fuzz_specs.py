"""Generated and mutated study specs: unknown keys, values of the wrong type, out-of-range and extreme
numbers, missing sections, and broken TOML text. `study validate` and `study run` must end in exit 0 or
exit 2 with one line, in bounded time and memory, and a refused `study run` must leave the study folder
it was pointed at exactly as it was."""

from __future__ import annotations

import copy
import json
import math
import re
import shutil

import pytest
from hypothesis import strategies as st

HOSTILE = (0, -1, 1, 2, 3, 10**9, 10**18, 10**30, -(10**30), 0.0, -0.5, 0.5, 1.5, 1e-300, 1e300, float("inf"),
           float("-inf"), float("nan"), "", "x", "auto", "probe:multihop", "bpe:99999999", "char", "../../etc/passwd",
           "9" * 80, True, False, [], [0], [1e300], [-1, 1], [[1]], ["a"], {}, {"a": 1})


def base_spec(corpus: str) -> dict:
    return {
        "name": "fz", "hardware": "cpu", "seeds": [0],
        "model": {"ffn": "gelu", "pos": "learned"},
        "data": {"corpus": corpus, "seq_len": 16, "batch_size": 4, "tokenizer": "byte", "val_fraction": 0.1},
        "train": {"steps": 2, "warmup": 0, "weight_decay": 0.1},
        "eval": {"every": 1, "windows": 2},
        "lr": {"grid": [1e-3]},
        "bench": {"enabled": False},
        "execution": {"threads": 1, "max_attempts": 1},
        "shape": [{"n_layers": 1, "d_model": 16, "n_heads": 2}],
    }


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, (int, str)):
        return str(v) if isinstance(v, int) else json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(_value, v)) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"


def to_toml(doc: dict) -> str:
    """TOML text of a spec-like dict: scalars first, then [tables], then [[arrays of tables]]."""
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    lines = [f"{_key(k)} = {_value(v)}" for k, v in doc.items() if k not in tables and k not in arrays]
    for k, table in tables.items():
        lines += [f"[{_key(k)}]", *(f"{_key(kk)} = {_value(v)}" for kk, v in table.items())]
    for k, items in arrays.items():
        for item in items:
            lines += [f"[[{_key(k)}]]", *(f"{_key(kk)} = {_value(v)}" for kk, v in item.items())]
    return "\n".join(lines) + "\n"


def spec_doc(corpus: str, variant: dict) -> dict:
    """A valid spec as a dict: the base with a variant's sections (None removes one)."""
    return copy.deepcopy({k: v for k, v in {**base_spec(corpus), **variant}.items() if v is not None})


def hostile(draw):
    """A fresh copy of a hostile value (a shared list or table would be changed by later mutations)."""
    return copy.deepcopy(draw(st.sampled_from(HOSTILE)))


#: other valid ways to say what to train: families planned from a parameter or a compute budget, a
#: learning-rate grid centred per width
VARIANTS = (
    {},
    {"shape": None, "budget": [{"params": 30000, "count": 2, "align": 8, "head_dim": 8, "tolerance": 0.2}]},
    {"shape": None, "train": {"warmup": 0}, "budget": [{"flops": 1e11, "tokens_per_param": 20, "count": 2,
                                                        "align": 8, "head_dim": 8, "tolerance": 0.3}]},
    {"lr": {"centre": 1e-3, "reference_width": 16, "factors": [0.5, 2.0]}},
)


@st.composite
def mutated_specs(draw, corpus: str) -> str:
    doc = spec_doc(corpus, draw(st.sampled_from(VARIANTS)))
    for _ in range(draw(st.integers(1, 3))):
        section = draw(st.sampled_from(sorted(doc)))
        kind = draw(st.sampled_from(["set", "set", "set", "delete", "unknown", "replace"]))
        target = doc[section][0] if isinstance(doc[section], list) and doc[section] and \
            isinstance(doc[section][0], dict) else doc[section]
        if kind == "delete":
            doc.pop(section)
        elif kind == "replace":
            doc[section] = hostile(draw)
        elif isinstance(target, dict):
            name = draw(st.sampled_from(sorted(target) or ["x"])) if kind == "set" else draw(
                st.sampled_from(["nosuch", "Steps", "tokens", "tokens_per_param", "min_lr_ratio", "init_from", "lr",
                                 "seed", "max_seq_len", "n_kv_heads", "d_ff", "head_dim", "every"]))
            target[name] = hostile(draw)
        else:
            doc[section] = hostile(draw)
    text = to_toml(doc)
    edit = draw(st.sampled_from(["none", "none", "truncate", "insert", "drop_line", "duplicate_line"]))
    lines = text.splitlines(keepends=True)
    if edit == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif edit == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["[", "]", "=", '"', "\n", "[[", "# ", "\\", "\x00", "\ufeff"])) + \
            text[at:]
    elif edit in ("drop_line", "duplicate_line") and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines[i:i + 1] = [] if edit == "drop_line" else [lines[i], lines[i]]
        text = "".join(lines)
    return text


#: what a typo makes of a list (its length) or of a size (its value): far past any real study, and the
#: largest values the bounds let through (which must then run)
LONG = (16, 64, 65, 1024, 1025, 20_000)
HUGE = (64, 4096, 4097, 100_000, 131_073, 2**31, 10**19, 1e12, 1e300)
#: (section, key) of every list a spec has, and of the sizes that bound a run's threads, processes, lists
LISTS = ((None, "seeds"), ("lr", "grid"), ("lr", "factors"), ("bench", "batches"), ("bench", "prompt_lens"),
         ("bench", "contexts"), ("budget", "depths"), ("budget", "widths"), (None, "shape"), (None, "budget"))
SIZES = (("execution", "threads"), ("execution", "workers"), ("execution", "cpus_per_run"),
         ("execution", "gpus_per_run"), ("execution", "nproc_per_run"), ("execution", "max_attempts"),
         ("bench", "repeat"), ("lr", "step"), ("lr", "max_trials"), ("lr", "centre"), ("lr", "exponent"),
         ("lr", "reference_width"), ("data", "seq_len"), ("data", "batch_size"), ("eval", "windows"),
         ("eval", "every"), ("train", "steps"), ("train", "warmup"), ("train", "micro_batch"), ("model", "max_seq_len"),
         ("budget", "params"), ("budget", "count"), ("budget", "align"), ("budget", "head_dim"), ("shape", "n_layers"),
         ("shape", "d_model"), ("shape", "n_heads"))


def _long(section: str | None, key: str, n: int) -> list:
    """A list of `n` distinct values of the kind `key` holds."""
    if key == "shape":
        return [{"n_layers": 1 + i % 4, "d_model": 16, "n_heads": 2} for i in range(n)]
    if key == "budget":
        return [{"params": 30000 + i, "count": 2, "align": 8, "head_dim": 8, "tolerance": 0.2} for i in range(n)]
    if section == "lr":
        return [round(1e-4 * (1 + i / n), 12) for i in range(n)]
    return list(range(1, n + 1))


@st.composite
def sized_specs(draw, corpus: str) -> str:
    """A valid spec with one or two of its lists made long or its sizes huge."""
    doc = spec_doc(corpus, draw(st.sampled_from(VARIANTS)))
    doc["bench"] = {"enabled": draw(st.booleans()), "prompt_lens": [4], "contexts": [4], "batches": [1], "repeat": 1}
    doc.setdefault("model", {})["max_seq_len"] = 32
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            section, key = draw(st.sampled_from(LISTS))
            value = _long(section, key, draw(st.sampled_from(LONG)))
        else:
            (section, key), value = draw(st.sampled_from(SIZES)), draw(st.sampled_from(HUGE))
        if section in ("budget", "shape"):
            tables = doc.setdefault(section, [{"params": 30000, "count": 2, "align": 8, "head_dim": 8}])
            tables[0][key] = value
        elif section is None:
            doc[key] = value
        else:
            doc.setdefault(section, {})[key] = value
    return to_toml(doc)


def _check_spec(harness, fuzz_paths, root, counter, category: str):
    def check(text: str) -> None:
        n = next(counter)
        spec = root / f"spec{n}.toml"
        spec.write_text(text, encoding="utf-8")
        harness.check(category, ["study", "validate", str(spec)])
        study = root / f"study{n}"
        shutil.copytree(fuzz_paths["study"], study)
        before = harness.snapshot(study)
        result = harness.check(category, ["study", "run", str(spec), "--dir", str(study)])
        if result.code == 2:
            assert harness.snapshot(study) == before, f"a refused study run changed {study}: {result.stderr}"
        shutil.rmtree(study)

    return check


def test_mutated_specs(harness, fuzz_paths, driver_stand_in, tmp_path_factory, profile):
    root = tmp_path_factory.mktemp("fuzz-specs")
    check = _check_spec(harness, fuzz_paths, root, iter(range(10**9)), "specs")
    harness.fuzz(mutated_specs(fuzz_paths["text"]), check, profile=profile, scale=2)


def test_long_lists_and_huge_sizes(harness, fuzz_paths, driver_stand_in, tmp_path_factory, profile):
    """Lists thousands long and sizes far past any real study: validated (or refused) in bounded time and
    memory, each refusal one line, and what validates runs."""
    root = tmp_path_factory.mktemp("fuzz-sizes")
    check = _check_spec(harness, fuzz_paths, root, iter(range(10**9)), "sizes")
    harness.fuzz(sized_specs(fuzz_paths["text"]), check, profile=profile, scale=0.5)


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_the_base_specs_are_valid(harness, fuzz_paths, tmp_path, variant):
    spec = tmp_path / "base.toml"
    spec.write_text(to_toml(spec_doc(fuzz_paths["text"], VARIANTS[variant])))
    result = harness.run(["study", "validate", str(spec)])
    assert result.code == 0, result.stderr
