"""Generated flags for every command of `depthwidth` (read from the parser itself, so a new command or
flag is fuzzed with no edit here): hostile values (negative, zero, huge, infinite, overflowing, empty,
of the wrong kind, unknown choices, sizes past every bound, lists thousands long), hostile paths
(missing, a folder, below a file, /dev/null, empty, binary) and unknown flags, alone or as changes to a
valid command line. Each must end in exit 0 or exit 2 with one line, within the harness's time and
memory bounds."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import strategies as st

HOSTILE = ("0", "-1", "-5M", "-1e19", "-1e-3", "1e400", "-1e400", "inf", "-inf", "nan", "NaN",
           "99999999999999999999", "1" + "0" * 30, "1e-400", "0x10", "1_000", "", " ", "3.5", "-0", "1e19",
           "2147483648",
           "4294967297", "9" * 5000, "1,2,3", "1,,2", "-1,2", "0,0", ",", "5%", "120%", "L0-H8-A1", "L12-H768-A7",
           "L99999999-H99999999-A1", "probe:", "probe:multihop:0", "probe:recall@99999999999", "bpe:0",
           "bpe:99999999999", "byte", "char", "a+b", "none", "true", "null", "é", "\u202e", "-", "--", "---x")
SIZES = ("1", "2", "4", "8", "16", "32", "64", "128")
#: sizes past every bound (threads, batches, widths, depths, learning rates) and lists thousands long
HUGE = ("4097", "16384", "100000", "131072", "1000000000", "1e300", "10", "65", ",".join(map(str, range(1, 70))),
        ",".join(str(16 * k) for k in range(1, 5000)))

#: a valid command line per command, changed by the generated flags
BASES = {
    ("calc",): ["--preset", "gpt2-small"],
    ("plan",): ["--params", "1M", "--vocab", "256", "--max-seq-len", "64", "--align", "16", "--head-dim", "16"],
    ("compare",): ["L2-H64-A2", "L4-H32-A2"],
    ("train",): ["--shape", "L1-H8-A1", "--steps", "2", "--seq-len", "8", "--batch-size", "2", "--data", "{text}"],
    ("bench",): ["--layers", "1", "--width", "16", "--heads", "2", "--vocab", "64", "--max-seq-len", "32",
                 "--prompt-lens", "4", "--contexts", "4", "--no-throughput", "--repeat", "1", "--warmup", "0",
                 "--hardware", "cpu"],
    ("study", "validate"): ["{spec}"],
    ("study", "run"): ["{spec}", "--dir", "{empty_dir}"],
    ("study", "status"): ["{study}"],
    ("study", "show"): ["{study}"],
    ("recommend",): ["{study}"],
    ("explore",): ["{study}", "--port", "0"],
    ("report",): ["{study}", "-o", "{empty_dir}"],
    ("probe", "show"): ["multihop"],
    ("probe", "capacity"): ["--shape", "L1-H16-A2", "--facts", "8"],
    ("check", "coord"): ["--widths", "16", "--depths", "1", "--steps", "1", "--head-dim", "8", "--seq-len", "8",
                         "--batch-size", "2", "--corpus", "{text}"],
    ("check", "transfer"): ["--widths", "16", "--depths", "1", "--lrs", "2", "--steps", "2", "--head-dim", "8",
                            "--seq-len", "8", "--batch-size", "2", "--eval-windows", "2", "--corpus", "{text}"],
    ("hw", "list"): [],
    ("hw", "measure"): ["--quick"],
}


def leaf_commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """(command words) -> parser, for every command and sub-command the CLI has."""
    from depthwidth.cli import build_parser

    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(words: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and words:
            out[words] = parser
        for action in subs:
            for name, child in action.choices.items():
                walk((*words, name), child)

    walk((), build_parser())
    return out


COMMANDS = leaf_commands()


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def values(action: argparse.Action, paths: dict) -> st.SearchStrategy[str]:
    choices = [str(c) for c in action.choices] if action.choices else []
    pools = [st.sampled_from(HOSTILE), st.sampled_from(sorted(paths.values())), st.sampled_from(SIZES),
             st.sampled_from(HUGE),
             st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)]
    if choices:
        pools.insert(0, st.sampled_from(choices))
    return st.one_of(*pools)


@st.composite
def command_lines(draw, paths: dict) -> list[str]:
    words = draw(st.sampled_from(sorted(COMMANDS)))
    parser = COMMANDS[words]
    base = [a.format(**paths) for a in BASES.get(words, [])] if draw(st.booleans()) else []
    argv = list(words) + base
    acts = options(parser)
    for action in draw(st.lists(st.sampled_from(acts), max_size=5)) if acts else []:
        if not action.option_strings:  # a positional
            argv.append(draw(values(action, paths)))
            continue
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs != 0:
            count = 1 if action.nargs in (None, "?") else draw(st.integers(1, 3))
            argv += [draw(values(action, paths)) for _ in range(count)]
    if draw(st.integers(0, 9)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--nosuch", "-x", "nosuchcommand"])))
    return argv


def test_generated_flags_of_every_command(harness, fuzz_paths, stand_ins, executor_stand_in, profile):
    harness.fuzz(command_lines(fuzz_paths), lambda argv: harness.check("flags", argv), profile=profile, scale=5)


@pytest.mark.parametrize("words", sorted(BASES), ids=" ".join)
def test_the_base_command_lines_are_accepted(harness, fuzz_paths, stand_ins, executor_stand_in, words):
    """The valid ground the fuzz changes: each base line passes every check (exit 0, or a stand-in). The
    fuzz study's two-step runs are not below their bigram baseline, so `recommend` finds no verdict: its
    exit 1, an outcome, not an error."""
    result = harness.run([*words, *[a.format(**fuzz_paths) for a in BASES[words]]])
    if words == ("recommend",):
        assert result.code == 1 and "no verdict at shapes" in " ".join(result.stdout.split()), result.stderr
        return
    assert result.code == 0, result.stderr
