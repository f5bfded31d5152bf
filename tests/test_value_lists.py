"""Every closed set of allowed values is one tuple owned by the module that implements it: the CLI's
choices and the study spec's checker are that tuple, and no CLI or spec module types the list again."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from depthwidth.artifact.config import DTYPES as TRAIN_DTYPES, PARALLEL, SCHEDULES, TrainConfig
from depthwidth.bench.config import BENCH_DTYPES, CPU_BENCH_DTYPES, QUANTIZE
from depthwidth.cli import build_parser
from depthwidth.data.probes import PROBE_SPLITS
from depthwidth.machine.device import CPU_PROFILE_DTYPES, CUDA_PROFILE_DTYPES, DEVICE_KINDS, DEVICE_SETTINGS
from depthwidth.model.kernels import ATTN_IMPLS
from depthwidth.report.targets import MEMORY_KINDS, SERVING_DTYPES
from depthwidth.shapes import hardware, memory, shape
from depthwidth.shapes.activations import FLOAT_DTYPES
from depthwidth.shapes.flops import ATTENTION_KINDS, RECOMPUTE_KINDS
from depthwidth.shapes.ops import ATTN_KERNELS
from depthwidth.shapes.parametrization import PARAMETRIZATIONS
from depthwidth.study.executors.base import EXECUTORS
from depthwidth.study.lr_search import MODES, SEARCHES
from depthwidth.study.spec import BenchSpec, ExecutionSpec, LRSpec, ModelSpec
from depthwidth.study.spec_train import PLACED

SRC = Path(__file__).resolve().parents[1] / "src" / "depthwidth"

#: (command path, flag) -> the owner's tuple
FLAGS = {
    (("plan",), "--dtype"): hardware.DTYPES,
    (("compare",), "--dtype"): hardware.DTYPES,
    (("recommend",), "--dtype"): SERVING_DTYPES,
    (("recommend",), "--memory"): MEMORY_KINDS,
    (("bench",), "--dtype"): BENCH_DTYPES,
    (("bench",), "--attn-impl"): ATTN_IMPLS,
    (("bench",), "--quantize"): tuple(q for q in QUANTIZE if q is not None),
    (("train",), "--dtype"): TRAIN_DTYPES,
    (("train",), "--cuda-dtype"): TRAIN_DTYPES,
    (("train",), "--schedule"): SCHEDULES,
    (("train",), "--parametrization"): PARAMETRIZATIONS,
    (("train",), "--parallel"): PARALLEL,
    (("train",), "--attn-impl"): ATTN_IMPLS,
    (("study", "run"), "--executor"): EXECUTORS,
    (("demo",), "--executor"): EXECUTORS,
    (("calc",), "--attn-impl"): ATTN_KERNELS,
    (("calc",), "--attention"): ATTENTION_KINDS,
    (("calc",), "--recompute"): RECOMPUTE_KINDS,
    (("calc",), "--param-dtype"): FLOAT_DTYPES,
    (("calc",), "--kv-dtype"): memory.KV_DTYPES,
    (("calc",), "--train-precision"): memory.TRAIN_PRECISIONS,
    (("calc",), "--convention"): memory.CONVENTIONS,
    (("calc",), "--residual-dtype"): FLOAT_DTYPES,
    (("calc",), "--grad-dtype"): FLOAT_DTYPES,
    (("plan",), "--convention"): memory.CONVENTIONS,
    (("calc",), "--ffn"): shape.FFN_KINDS,
    (("calc",), "--norm"): shape.NORM_KINDS,
    (("calc",), "--bias"): shape.BIAS_KINDS,
    (("calc",), "--pos"): shape.POS_KINDS,
    (("calc",), "--kind"): shape.KINDS,
    (("plan",), "--ffn"): shape.FFN_KINDS,
    (("plan",), "--pos"): shape.POS_KINDS,
    (("probe", "show"), "--split"): PROBE_SPLITS,
}


def _subparser(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("where,flag", list(FLAGS), ids=[" ".join((*p, f)) for p, f in FLAGS])
def test_cli_choices_are_the_owners_tuple(parser, where, flag):
    action = next(a for a in _subparser(parser, where)._actions if flag in a.option_strings)
    assert tuple(action.choices) == FLAGS[where, flag]


@pytest.mark.parametrize("cls,field,owner", [
    (ModelSpec, "ffn", shape.FFN_KINDS), (ModelSpec, "norm", shape.NORM_KINDS), (ModelSpec, "bias", shape.BIAS_KINDS),
    (ModelSpec, "pos", shape.POS_KINDS), (ModelSpec, "norm_position", shape.NORM_POSITIONS),
    (LRSpec, "search", SEARCHES), (BenchSpec, "dtype", CPU_BENCH_DTYPES), (ExecutionSpec, "parallel", PARALLEL),
])
def test_spec_choices_are_the_owners_tuple(cls, field, owner):
    spec_field = next(f for f in dataclasses.fields(cls) if f.name == field)
    assert spec_field.metadata["check"].options == owner
    assert spec_field.default in owner


def test_a_spec_key_has_one_home():
    # nproc, parallel and tp are TrainConfig's execution fields: a study sets them in [execution] only
    execution = {f.name for f in dataclasses.fields(ExecutionSpec)}
    for key in ("nproc", "parallel", "tp", "threads"):
        section, _, name = PLACED[key].partition(".")
        assert section == "execution" and name in execution
    train_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(PLACED) <= train_fields


def test_dtype_concepts_have_one_name_each():
    # what a run trains in: fp16 is not offered (no loss scaling), on any device, for dtype and cuda_dtype
    assert TRAIN_DTYPES == ("fp32", "bf16")
    for name in ("dtype", "cuda_dtype"):
        assert next(f for f in dataclasses.fields(TrainConfig) if f.name == name).metadata["choices"] is TRAIN_DTYPES
    # what a hardware profile times, by device kind; what a serving benchmark runs in
    assert set(CPU_PROFILE_DTYPES) < set(CUDA_PROFILE_DTYPES) <= set(hardware.DTYPES)
    assert BENCH_DTYPES is FLOAT_DTYPES and "fp16" in BENCH_DTYPES
    assert CPU_BENCH_DTYPES == tuple(d for d in BENCH_DTYPES if d in CPU_PROFILE_DTYPES) and "fp16" not in CPU_BENCH_DTYPES
    assert set(BENCH_DTYPES) <= set(CUDA_PROFILE_DTYPES)  # every bench dtype has a measured peak on CUDA
    assert set(MODES) > set(SEARCHES) and set(DEVICE_KINDS) < set(DEVICE_SETTINGS)
    for gone in ("CUDA_DTYPES", "CPU_DTYPES"):
        for module in ("depthwidth.machine", "depthwidth.machine.profile", "depthwidth.artifact.config",
                       "depthwidth.bench.config"):
            assert not hasattr(importlib.import_module(module), gone), f"{module}.{gone}"


#: the owners whose lists no CLI or spec module may spell out again
OWNED = (hardware.DTYPES, FLOAT_DTYPES, memory.KV_DTYPES, memory.CONVENTIONS, memory.TRAIN_PRECISIONS,
         shape.FFN_KINDS, shape.NORM_KINDS, shape.BIAS_KINDS, shape.POS_KINDS, shape.NORM_POSITIONS, shape.KINDS,
         ATTN_KERNELS, ATTN_IMPLS, ATTENTION_KINDS, RECOMPUTE_KINDS, PARAMETRIZATIONS, TRAIN_DTYPES, SCHEDULES,
         PARALLEL, CPU_PROFILE_DTYPES, CUDA_PROFILE_DTYPES, DEVICE_KINDS, DEVICE_SETTINGS, EXECUTORS, SEARCHES,
         MODES, MEMORY_KINDS, PROBE_SPLITS)
CHECKED = sorted((SRC / "cli").glob("*.py")) + [SRC / "study" / f for f in ("spec.py", "spec_train.py", "schema.py")]


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(SRC)))
def test_no_cli_or_spec_module_types_an_owned_list(path):
    owned = {frozenset(t) for t in OWNED}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            if frozenset(e.value for e in node.elts) in owned:
                found.append(f"line {node.lineno}: {[e.value for e in node.elts]}")
    assert not found, f"{path.name} spells out a list its owner defines: {found}"
