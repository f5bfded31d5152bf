"""Probe generators: deterministic for a seed, and every answer verified by an independent checker
that reads only the example's text."""

import re

import pytest

from depthwidth.data.probes import (
    PROBES,
    ProbeSpec,
    build_probe_set,
    capacity_bits,
    fact_table,
    generate,
)


def check_multihop(prompt: str) -> str:
    m = re.fullmatch(r"((?:[a-z]{2},)*[a-z]{2})\|((?:\d+[a-z]{2},)*)(\d+)([a-z])", prompt)
    assert m, prompt
    pairs = m.group(1).split(",")
    edges = {p[0]: p[1] for p in pairs}
    assert len(edges) == len(pairs), "each letter has exactly one pointer"

    def walk(node: str, hops: int) -> str:
        for _ in range(hops):
            node = edges[node]
        return node

    for answered in filter(None, m.group(2).split(",")):  # the answered queries are right too
        assert walk(answered[-2], int(answered[:-2])) == answered[-1]
    return walk(m.group(4), int(m.group(3)))


def check_recall(prompt: str) -> str:
    pairs, queries = prompt.split("|")
    table = {}
    for pair in pairs.split(","):
        key, value = pair[0], pair[1:]
        assert key not in table, "keys are unique within an example"
        table[key] = value
    *answered, last = queries.split(",")
    for q in answered:
        assert table[q[0]] == q[1:]
    assert sorted([q[0] for q in answered] + [last]) == sorted(table), "every key is queried once"
    return table[last]


def check_addition(prompt: str) -> str:
    a, b = prompt.rstrip("=").split("+")
    # column-wise schoolbook addition, independent of Python's int addition of the generator
    da, db = a[::-1], b[::-1]
    carry, digits = 0, []
    for i in range(max(len(da), len(db))):
        s = carry + (int(da[i]) if i < len(da) else 0) + (int(db[i]) if i < len(db) else 0)
        digits.append(str(s % 10))
        carry = s // 10
    if carry:
        digits.append(str(carry))
    return "".join(reversed(digits))


def check_parity(prompt: str) -> str:
    acc = 0
    for ch in prompt.rstrip(":"):
        acc ^= ch == "1"
    return str(int(acc))


CHECKERS = {"multihop": check_multihop, "recall": check_recall, "addition": check_addition, "parity": check_parity}


@pytest.mark.parametrize("name", sorted(CHECKERS))
@pytest.mark.parametrize("difficulty", [1, 2, 5])
def test_answers_agree_with_an_independent_checker(name, difficulty):
    examples = generate(name, difficulty=difficulty, n=200, seed=3)
    for ex in examples:
        assert CHECKERS[name](ex.prompt) == ex.answer
        assert ex.text == ex.prompt + ex.answer + "\n"


def test_multihop_difficulty_changes_the_answer_distribution():
    # k hops must really be k: with a cycle of n letters, 1 hop and 2 hops never agree
    one = generate("multihop", difficulty=1, n=50, seed=1)
    for ex in one:
        pairs = ex.prompt.split("|")[0]
        two = f"{pairs}|2{ex.prompt[-1]}"
        assert check_multihop(two) != ex.answer


def test_facts_are_a_fixed_table_seen_in_training():
    train = generate("facts", difficulty=64, n=300, seed=5)
    test = generate("facts", difficulty=64, n=100, seed=5, split="test")
    table = {}
    for ex in train:
        assert table.setdefault(ex.prompt, ex.answer) == ex.answer, "a fact never changes its value"
    assert len(table) == 64, "every fact appears in training"
    for ex in test:
        assert table[ex.prompt] == ex.answer
    assert len({k for k, _ in fact_table(64, 5)}) == 64


@pytest.mark.parametrize("name", PROBES)
def test_deterministic_for_a_seed_and_different_across_seeds_and_splits(name):
    a = generate(name, difficulty=3, n=40, seed=7)
    assert a == generate(name, difficulty=3, n=40, seed=7)
    assert a != generate(name, difficulty=3, n=40, seed=8)
    if name != "facts":
        test = generate(name, difficulty=3, n=40, seed=7, split="test")
        assert {e.prompt for e in a}.isdisjoint({e.prompt for e in test}) or name in ("parity", "recall")


def test_probe_set_holds_unseen_difficulty_in_test():
    train, test = build_probe_set(ProbeSpec(name="multihop", train_difficulties=(1, 2), test_difficulties=(2, 3),
                                            n_train=30, n_test=10))
    assert {e.difficulty for e in train} == {1, 2} and len(train) == 60
    assert [e.difficulty for e in test].count(3) == 10


def test_capacity_bits():
    assert capacity_bits(n_facts=100, accuracy=1.0) == pytest.approx(100 * 9.965784, rel=1e-6)
    assert capacity_bits(n_facts=100, accuracy=0.0005) == 0.0
    assert capacity_bits(n_facts=100, accuracy=0.5) == pytest.approx(100 * (0.5 - 0.001) / 0.999 * 9.965784, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs, field",
    [(dict(name="nope", train_difficulties=(1,), test_difficulties=(1,)), "name"),
     (dict(name="multihop", train_difficulties=(), test_difficulties=(1,)), "train_difficulties"),
     (dict(name="multihop", train_difficulties=(0,), test_difficulties=(1,)), "train_difficulties"),
     (dict(name="recall", train_difficulties=(1,), test_difficulties=(99,)), "test_difficulties"),
     (dict(name="parity", train_difficulties=(1,), test_difficulties=(1,), n_train=0), "n_train")],
)
def test_bad_specs_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ProbeSpec(**kwargs)


@pytest.mark.parametrize(
    "spec, words",
    [("multihop", "must start"), ("probe:nope", "NAME one of"), ("probe:multihop:1,x", "comma-separated"),
     ("probe:multihop:1:2:3", "NAME one of"), ("probe:parity@many", "positive integer"),
     ("probe:multihop:0", "train_difficulties")],
)
def test_bad_probe_specs_say_what_is_expected(spec, words):
    from depthwidth.data.probes import parse_probe_spec

    with pytest.raises(ValueError, match=words):
        parse_probe_spec(spec)
