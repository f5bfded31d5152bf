"""Synthetic probe tasks that separate what depth buys from what width buys.

Every example is plain text, `prompt + answer + "\\n"`, so a probe goes through the same tokenizer as
natural text (the byte tokenizer by default) and can be mixed into a study as a slice. Accuracy is
exact match on the answer tokens, teacher-forced (see `depthwidth.train.probe_eval`).

Probes (difficulty in brackets):
- `multihop` [k hops], depth-hungry: a fresh random cycle of letters is written as pointers
  "be,ea,..." (b points to e), then queries "2b" ask where k=2 hops from a start letter lead, each
  followed by its answer; the last query's answer is scored. One hop is exactly what an induction
  head does (copy the token that followed the previous occurrence); Composing k lookups
  inside one forward pass needs about k sequential steps (Sanford et al. 2024 relate the number of
  hops a Transformer can compose to its depth).
- `recall` [n pairs], in-context multi-query associative recall (MQAR, Arora et al. 2023, "Zoology"):
  n key-value pairs "b3,f7,...", then every key is queried once in a random order, each query
  followed by its value; the last value is scored (harder with more pairs in the context).
Several answered queries per example give many supervised tokens per sequence, which is what makes
these tasks learnable with a plain language-model loss in CPU minutes.
- `facts` [n facts], memorisation in the weights: a fixed table of n key -> value facts (the same
  table for every seed of a split; train and test query the same facts), so accuracy measures
  capacity; `capacity_bits` turns accuracy into stored bits (Allen-Zhu & Li 2024 report about 2 bits
  per parameter for trained LMs).
- `addition` [n digits] and `parity` [n bits], algorithmic sequential computation.
- `hops` [k hops, from 0], depth-hungry, with a target at every position: hop-k induction (Sanford,
  Hsu & Telgarsky 2024; definition, layout and sampling in `depthwidth.data.hops`). Its training rows
  are fresh sequences every step, not the text written into the corpus (that text, N examples per k,
  only sets the probe's share of training rows); it is scored by token error on fixed held-out rows.

Generators are deterministic functions of (probe, difficulty, seed, split, n); train and test splits
use disjoint seeds streams. Pure standard library (`hops`, which needs numpy, is imported on use).
"""

from __future__ import annotations

import math
import random
import string
from dataclasses import dataclass

from depthwidth.errors import UserError
from depthwidth.shapes.checks import shown

LETTERS = string.ascii_lowercase
QUERIES = 4  # multihop queries per example (the last one is scored)
KEY_ALPHABET = "bcdfghjklmnpqrstvwxz"  # consonants: keys never collide with values or separators


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeExample:
    probe: str
    difficulty: int
    prompt: str
    answer: str

    @property
    def text(self) -> str:
        return self.prompt + self.answer + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeSpec:
    """Which probe, at which difficulties, how many examples."""

    name: str
    train_difficulties: tuple[int, ...]
    test_difficulties: tuple[int, ...]  # may include unseen difficulties (e.g. one more hop)
    n_train: int = 2000
    n_test: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if self.name not in PROBES:
            raise UserError(f"probe name={self.name!r} is unknown; expected one of {', '.join(PROBES)}")
        for field in ("train_difficulties", "test_difficulties"):
            values = getattr(self, field)
            low = MIN_DIFFICULTY.get(self.name, 1)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in values):
                raise UserError(f"{field}={values!r} must be a non-empty list of integers >= {low}")
            limit = MAX_DIFFICULTY[self.name]
            if max(values) > limit:
                raise UserError(f"{field}: {self.name} supports difficulty up to {limit}, got {max(values)}")
            if len(values) > MAX_DIFFICULTIES:
                raise UserError(f"{field}: {len(values):,} difficulties, above the limit of {MAX_DIFFICULTIES} (a "
                                "probe's levels; each is a set of examples of its own)")
        for field, n_levels in (("n_train", len(self.train_difficulties)), ("n_test", len(self.test_difficulties))):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{field}={shown(value)} must be a positive integer")
            if value * n_levels > MAX_EXAMPLES:
                raise UserError(f"{field}={shown(value)} x {n_levels} difficulties is above the limit of "
                                f"{MAX_EXAMPLES:,} examples ({MAX_EXAMPLES_WHY})")


def _rng(probe: str, difficulty: int, seed: int, split: str, index: int) -> random.Random:
    # A string seed is hashed with SHA-512 by `random`, so it is stable across runs and platforms.
    return random.Random(f"{probe}/{difficulty}/{seed}/{split}/{index}")


def _multihop(rng: random.Random, k: int) -> tuple[str, str]:
    n = max(6, k + 3)
    letters = rng.sample(LETTERS, n)
    nxt = {letters[i]: letters[(i + 1) % n] for i in range(n)}  # one cycle through n letters
    pairs = [a + b for a, b in nxt.items()]  # "ab": a points to b
    rng.shuffle(pairs)
    queries = []
    for start in rng.sample(letters, QUERIES):
        node = start
        for _ in range(k):
            node = nxt[node]
        queries.append((f"{k}{start}", node))
    answered = ",".join(q + a for q, a in queries[:-1])
    return f"{','.join(pairs)}|{answered},{queries[-1][0]}", queries[-1][1]


def _recall(rng: random.Random, n: int) -> tuple[str, str]:
    keys = rng.sample(KEY_ALPHABET, n)
    values = [str(rng.randrange(10)) for _ in keys]
    pairs = ",".join(k + v for k, v in zip(keys, values))  # "b3": key b holds 3
    order = rng.sample(range(n), n)  # every key is queried once, in a random order
    answered = "".join(f"{keys[i]}{values[i]}," for i in order[:-1])
    return f"{pairs}|{answered}{keys[order[-1]]}", values[order[-1]]


def fact_table(n: int, seed: int) -> list[tuple[str, str]]:
    """The fixed table of n memorisation facts: 4-consonant key -> 3-digit value."""
    rng = random.Random(f"facts-table/{n}/{seed}")
    keys: set[str] = set()
    while len(keys) < n:
        keys.add("".join(rng.choice(KEY_ALPHABET) for _ in range(4)))
    return [(k, f"{rng.randrange(1000):03d}") for k in sorted(keys)]


def _addition(rng: random.Random, n: int) -> tuple[str, str]:
    a = rng.randrange(10 ** (n - 1) if n > 1 else 0, 10**n)
    b = rng.randrange(10 ** (n - 1) if n > 1 else 0, 10**n)
    return f"{a}+{b}=", str(a + b)


def _parity(rng: random.Random, n: int) -> tuple[str, str]:
    bits = "".join(rng.choice("01") for _ in range(n))
    return f"{bits}:", str(bits.count("1") % 2)


PROBES = ("multihop", "recall", "facts", "addition", "parity", "hops")
#: a probe's splits: train and test ask about the same facts with other examples (module docstring)
PROBE_SPLITS = ("train", "test")
MAX_DIFFICULTY = {"multihop": 20, "recall": len(KEY_ALPHABET), "facts": 100_000, "addition": 30, "parity": 256,
                  "hops": 16}  # depthwidth.data.hops.MAX_K (that module needs numpy: imported on use)
MIN_DIFFICULTY = {"hops": 0}  # k = 0 (copy the letter) is a level of its own; every other probe starts at 1
#: probes with a target at every position, generated fresh each step (`depthwidth.data.hops`), scored by
#: token error rather than exact match of one answer
DENSE_PROBES = ("hops",)
#: the most difficulty levels a probe spec lists, and the most examples it generates (all levels together)
MAX_DIFFICULTIES = 64
MAX_EXAMPLES = 10**7
MAX_EXAMPLES_WHY = "several hundred MB of text; the largest capacity curve, 100,000 facts 20 times each, has 2 million"
KINDS = {
    "multihop": "depth",
    "recall": "width",
    "facts": "width",
    "addition": "depth",
    "parity": "depth",
    "hops": "depth",
}


def generate(name: str, *, difficulty: int, n: int, seed: int = 0, split: str = "train") -> list[ProbeExample]:
    """`n` examples of probe `name` at `difficulty`, deterministic for (seed, split)."""
    if name not in PROBES:
        raise UserError(f"probe name={name!r} is unknown; expected one of {', '.join(PROBES)}")
    if split not in PROBE_SPLITS:
        raise UserError(f"split={split!r} must be one of {', '.join(map(repr, PROBE_SPLITS))}")
    low = MIN_DIFFICULTY.get(name, 1)
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not low <= difficulty <= MAX_DIFFICULTY[name]:
        raise UserError(f"difficulty={difficulty!r} for {name} must be an integer in {low}..{MAX_DIFFICULTY[name]}")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_EXAMPLES:
        raise UserError(f"n={shown(n)} must be an integer in 0..{MAX_EXAMPLES:,} ({MAX_EXAMPLES_WHY})")
    if name == "facts":
        table = fact_table(difficulty, seed)
        rng = random.Random(f"facts-order/{difficulty}/{seed}/{split}")
        if split == "train":  # every fact at least once, then uniform draws
            picks = list(range(len(table))) + [rng.randrange(len(table)) for _ in range(max(0, n - len(table)))]
            rng.shuffle(picks)
            picks = picks[: max(n, len(table))]
        else:
            picks = [rng.randrange(len(table)) for _ in range(n)]
        return [ProbeExample(probe=name, difficulty=difficulty, prompt=f"{table[i][0]}:", answer=table[i][1]) for i in picks]
    if name == "hops":
        from depthwidth.data import hops

        return [ProbeExample(probe=name, difficulty=difficulty, prompt=prompt, answer=answer)
                for prompt, answer in hops.examples_text(difficulty, n=n, key=f"{name}/{difficulty}/{seed}/{split}")]
    make = {"multihop": _multihop, "recall": _recall, "addition": _addition, "parity": _parity}[name]
    out = []
    for i in range(n):
        prompt, answer = make(_rng(name, difficulty, seed, split, i), difficulty)
        out.append(ProbeExample(probe=name, difficulty=difficulty, prompt=prompt, answer=answer))
    return out


def build_probe_set(spec: ProbeSpec) -> tuple[list[ProbeExample], list[ProbeExample]]:
    """(train, test) examples: train mixes the train difficulties evenly (interleaved), test holds
    n_test examples per test difficulty."""
    per = [generate(spec.name, difficulty=d, n=spec.n_train, seed=spec.seed) for d in spec.train_difficulties]
    train = [ex for group in zip(*per) for ex in group][: spec.n_train * len(per)]
    if spec.name == "facts":  # a fact can only be recalled if it was seen: keep every fact in train
        train = [ex for group in per for ex in group]
        random.Random(f"facts-mix/{spec.seed}").shuffle(train)
    test = []
    for d in spec.test_difficulties:
        test += generate(spec.name, difficulty=d, n=spec.n_test, seed=spec.seed, split="test")
    return train, test


def capacity_bits(*, n_facts: int, accuracy: float, value_space: int = 1000) -> float:
    """Estimated bits stored in the weights when `accuracy` of `n_facts` uniformly random values
    (from `value_space` possibilities) are recalled: the chance-corrected number of recalled facts
    times log2(value_space) bits each. An estimate: the exact mutual information is lower when the
    wrong answers are not uniform. 0 at or below chance."""
    chance = 1.0 / value_space
    if accuracy <= chance:
        return 0.0
    return n_facts * (accuracy - chance) / (1 - chance) * math.log2(value_space)


#: Default difficulties per probe: (train, test); test adds one unseen, harder level where it means something.
DEFAULTS: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "multihop": ((1, 2, 3), (1, 2, 3, 4), 3000),
    "recall": ((2, 4, 8), (2, 4, 8, 12), 3000),
    "facts": ((256,), (256,), 6000),
    "addition": ((2, 3), (2, 3, 4), 3000),
    "parity": ((4, 8), (4, 8, 12), 3000),
    "hops": ((0, 1, 2, 3, 4), (0, 1, 2, 3, 4), 1000),
}
PROBE_PREFIX = "probe:"


def _int_list(text: str, *, field: str, spec: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise UserError(f"probe spec {spec!r}: {field} must be comma-separated integers, got {text!r}") from None
    return values


def parse_probe_spec(spec: str, *, seed: int = 0) -> ProbeSpec:
    """`probe:NAME[:TRAIN[:TEST]][@N]`, e.g. `probe:multihop`, `probe:multihop:1,2,3:1,2,3,4@5000`.

    TRAIN and TEST are difficulty lists (TEST defaults to TRAIN when TRAIN is given), N the number of
    training examples per train difficulty. Unnamed parts take the per-probe DEFAULTS."""
    if not spec.startswith(PROBE_PREFIX):
        raise UserError(f"probe spec {spec!r} must start with {PROBE_PREFIX!r}")
    body, _, count = spec[len(PROBE_PREFIX):].partition("@")
    parts = body.split(":")
    name = parts[0]
    if name not in PROBES or len(parts) > 3:
        raise UserError(f"probe spec {spec!r}: expected probe:NAME[:TRAIN[:TEST]][@N] with NAME one of "
                         f"{', '.join(PROBES)}")
    train_d, test_d, n_train = DEFAULTS[name]
    if len(parts) >= 2 and parts[1]:
        train_d = _int_list(parts[1], field="train difficulties", spec=spec)
        test_d = train_d
    if len(parts) == 3 and parts[2]:
        test_d = _int_list(parts[2], field="test difficulties", spec=spec)
    if count:
        if not count.isdigit():
            raise UserError(f"probe spec {spec!r}: N after '@' must be a positive integer, got {count!r}")
        n_train = int(count)
    return ProbeSpec(name=name, train_difficulties=train_d, test_difficulties=test_d, n_train=n_train, seed=seed)


def canonical(spec: ProbeSpec) -> str:
    """The spec in one normal form, `NAME:TRAIN:TEST@N/n_test/seed`: what a dense probe's generators are keyed by."""
    join = lambda values: ",".join(map(str, values))  # noqa: E731
    return (f"{spec.name}:{join(spec.train_difficulties)}:{join(spec.test_difficulties)}@{spec.n_train}"
            f"/{spec.n_test}/{spec.seed}")


def dense_spec(slice_name: str) -> ProbeSpec | None:
    """The ProbeSpec of a corpus slice named `slice_name` when it is a dense-target probe, else None."""
    if not slice_name.startswith(PROBE_PREFIX):
        return None
    spec = parse_probe_spec(slice_name)
    return spec if spec.name in DENSE_PROBES else None


def probe_text(spec: ProbeSpec) -> str:
    """The training text of a probe: its train examples, one per line."""
    train, _ = build_probe_set(spec)
    return "".join(ex.text for ex in train)


def probe_test_set(spec: ProbeSpec) -> list[ProbeExample]:
    return build_probe_set(spec)[1]
