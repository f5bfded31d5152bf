"""Hop-k induction: targets against hand-worked sequences, the row layout, and training batches as a pure
function of (spec, seed, step)."""

import numpy as np
import pytest

from depthwidth.data import BatchStream, gather_windows, load_dataset
from depthwidth.data.hops import (
    ALPHABET,
    IGNORE,
    KEY_CHARS,
    MAX_K,
    SymbolIds,
    held_out_rows,
    hop_target_array,
    hop_targets,
    letters_text,
    random_letters,
    rows_of,
    train_rows,
)
from depthwidth.data.probes import (
    DEFAULTS,
    MAX_DIFFICULTY,
    ProbeSpec,
    canonical,
    dense_spec,
    generate,
    parse_probe_spec,
)
from depthwidth.data.tokenizers import ByteTokenizer
from depthwidth.errors import UserError

#    position  0 1 2 3 4 5 6 7
SEQUENCE = "abacbcab"
# prev (last earlier position of the same letter): -, -, 0, -, 1, 3, 2, 4
HAND_WORKED = {
    0: "abacbcab",  # zero hops: the letter itself
    1: "~~b~abcc",  # the letter after its previous occurrence (an induction head's copy)
    # k=2 at 6: 'a' -> after its previous 'a' (2) is 'c' at 3, which never occurred before: none
    2: "~~~~ba~b",
    3: "~~~~~b~a",  # 5: 5 -> 4 -> 2 -> 1 'b';  7: 7 -> 5 -> 4 -> 2 'a'
    4: "~~~~~~~b",  # 5: ... -> 1, and 'b' at 1 has no earlier occurrence: none;  7: 7 -> 5 -> 4 -> 2 -> 1 'b'
}


def letters(text: str) -> list[int]:
    return [ALPHABET.index(c) for c in text]


@pytest.mark.parametrize("k", sorted(HAND_WORKED))
def test_targets_of_a_hand_worked_sequence(k):
    assert letters_text(hop_targets(letters(SEQUENCE), k)) == HAND_WORKED[k]
    array = hop_target_array(np.array([letters(SEQUENCE)]), k)
    assert letters_text(array[0]) == HAND_WORKED[k]


def test_vectorised_targets_match_the_definition_for_mixed_k():
    rng = np.random.default_rng(0)
    rows = random_letters(rng, 300, 40)
    ks = rng.integers(0, 7, size=300)
    array = hop_target_array(rows, ks)
    for row, k, got in zip(rows, ks, array):
        assert list(got) == hop_targets(list(row), int(k))
    assert (array == len(ALPHABET)).any() and (array < len(ALPHABET)).any()


def test_random_letters_never_repeat_and_use_every_letter_evenly():
    rows = random_letters(np.random.default_rng(1), 500, 64)
    assert rows.shape == (500, 64) and (rows[:, 1:] != rows[:, :-1]).all()
    counts = np.bincount(rows.ravel(), minlength=len(ALPHABET)) / rows.size
    assert counts == pytest.approx([0.25] * 4, abs=0.01)


def test_row_layout_names_k_first_and_scores_every_other_position():
    ids = SymbolIds.of(ByteTokenizer())
    x, y = rows_of(np.array([letters(SEQUENCE)]), np.array([2]), ids)
    assert bytes(x[0].tolist()).decode() == "2" + SEQUENCE
    assert y[0, 0] == IGNORE
    assert bytes(y[0, 1:].tolist()).decode() == HAND_WORKED[2]


def test_held_out_rows_are_fixed_and_split_apart():
    ids = SymbolIds.of(ByteTokenizer())
    a = held_out_rows(canonical="c", k=2, ids=ids, split="test", rows=5, seq_len=16)
    np.testing.assert_array_equal(a[0], held_out_rows(canonical="c", k=2, ids=ids, split="test", rows=5,
                                                      seq_len=16)[0])
    assert not np.array_equal(a[0], held_out_rows(canonical="c", k=2, ids=ids, split="val", rows=5, seq_len=16)[0])
    assert (a[0][:, 0] == ord("2")).all()
    with pytest.raises(UserError, match="split"):
        held_out_rows(canonical="c", k=2, ids=ids, split="train", rows=5, seq_len=16)


def test_train_rows_are_a_pure_function_of_spec_seed_and_step():
    ids = SymbolIds.of(ByteTokenizer())
    kw = dict(canonical="hops:1,2", ks=(1, 2), ids=ids, rows=6, seq_len=24)
    a = train_rows(**kw, seed=0, step=3)
    same = train_rows(**kw, seed=0, step=3)
    np.testing.assert_array_equal(a[0], same[0])
    np.testing.assert_array_equal(a[1], same[1])
    for other in (train_rows(**kw, seed=0, step=4), train_rows(**kw, seed=1, step=3),
                  train_rows(**{**kw, "canonical": "hops:1,3"}, seed=0, step=3)):
        assert not np.array_equal(a[0], other[0])
    assert set(bytes(a[0][:, 0].tolist()).decode()) <= {"1", "2"}


def test_probe_spec_takes_k_from_zero_for_hops_only():
    spec = parse_probe_spec("probe:hops:0,1,2:0,1,2,3@50")
    assert spec.train_difficulties == (0, 1, 2) and spec.test_difficulties == (0, 1, 2, 3) and spec.n_train == 50
    assert canonical(spec) == "hops:0,1,2:0,1,2,3@50/200/0"
    assert dense_spec("probe:hops:0,1,2:0,1,2,3@50") == spec and dense_spec("probe:multihop") is None
    assert dense_spec("shakespeare") is None
    assert DEFAULTS["hops"][0][0] == 0 and MAX_DIFFICULTY["hops"] == MAX_K == len(KEY_CHARS) - 1
    with pytest.raises(UserError, match="train_difficulties.*>= 1"):
        ProbeSpec(name="multihop", train_difficulties=(0,), test_difficulties=(1,))
    with pytest.raises(UserError, match="test_difficulties: hops supports difficulty up to 16, got 17"):
        parse_probe_spec("probe:hops:1:17")
    with pytest.raises(UserError, match="difficulty=-1 for hops must be an integer in 0..16"):
        generate("hops", difficulty=-1, n=1)


def test_text_examples_are_the_sequence_then_its_targets():
    for ex in generate("hops", difficulty=3, n=20, seed=2):
        assert ex.prompt[0] == "3" and len(ex.prompt) == 65 and len(ex.answer) == 64
        assert ex.answer == letters_text(hop_targets(letters(ex.prompt[1:]), 3))
    assert generate("hops", difficulty=3, n=3, seed=2) == generate("hops", difficulty=3, n=20, seed=2)[:3]


@pytest.fixture
def mixed(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("".join(chr(97 + (i * 7) % 26) for i in range(20000)))
    return load_dataset(corpus=f"{path}+probe:hops:1,2:1,2,3@100", cache_dir=tmp_path / "c")


def test_batches_of_a_mixture_with_hops(mixed):
    stream = BatchStream(mixed, seq_len=32, batch_size=16, seed=0)
    probe = stream.dense[0]
    assert probe.name == "probe:hops:1,2:1,2,3@100" and probe.train_ks == (1, 2)
    x, y = stream.batch(5)
    pos = stream.positions(5)
    is_hops = (pos >= probe.span[0]) & (pos < probe.span[1])
    assert 0 < is_hops.sum() < 16  # both kinds of row in one batch
    text_x, text_y = gather_windows(stream.tokens, pos, 32)
    np.testing.assert_array_equal(x[~is_hops], text_x[~is_hops])  # text rows: next-token targets
    np.testing.assert_array_equal(y[~is_hops], text_y[~is_hops])
    for row_x, row_y in zip(x[is_hops], y[is_hops]):
        k = int(chr(row_x[0]))
        assert k in (1, 2) and row_y[0] == IGNORE
        seq = bytes(row_x[1:].tolist()).decode()
        assert bytes(row_y[1:].tolist()).decode() == letters_text(hop_targets(letters(seq), k))
    again = BatchStream(mixed, seq_len=32, batch_size=16, seed=0).batch(5)
    np.testing.assert_array_equal(x, again[0])
    np.testing.assert_array_equal(y, again[1])
    later = stream.batch(6)
    assert not np.array_equal(x, later[0])
    other_seed = BatchStream(mixed, seq_len=32, batch_size=16, seed=1).batch(5)
    assert not np.array_equal(x, other_seed[0])


def test_fresh_rows_every_step(tmp_path):
    ds = load_dataset(corpus="probe:hops:2@200", cache_dir=tmp_path / "c")
    stream = BatchStream(ds, seq_len=32, batch_size=8, seed=0)
    seen = {bytes(row.tolist()) for step in range(50) for row in stream.batch(step)[0]}
    assert len(seen) == 400  # no sequence comes back: none is drawn from a fixed training set


def test_validation_slice_of_hops_is_its_fixed_held_out_rows(mixed):
    a = BatchStream(mixed, seq_len=32, batch_size=16, seed=0).eval_slices(7)
    b = BatchStream(mixed, seq_len=32, batch_size=16, seed=3).eval_slices(7)
    text, hops = a
    assert text.rows is None and len(text.positions) == 7
    x, y = hops.rows
    assert x.shape == y.shape == (7, 32) and sorted(bytes(x[:, 0].tolist()).decode()) == list("1111222")
    np.testing.assert_array_equal(x, b[1].rows[0])  # the same for every seed
    assert hops.tokens == mixed.slices[1].val[1] - mixed.slices[1].val[0]


def test_a_tokenizer_that_splits_a_symbol_is_refused():
    class Pairs:
        spec = "pairs"

        def encode(self, text):
            return np.zeros(2 * len(text), dtype=np.int64)

    with pytest.raises(UserError, match="hops symbol 'a' as 2 tokens"):
        SymbolIds.of(Pairs())


def test_harness_tasks_refuse_a_dense_probe(tmp_path):
    from depthwidth.hf.harness import write_harness_tasks

    with pytest.raises(UserError, match="'hops' has a target at every position"):
        write_harness_tasks(["probe:hops:1,2", "multihop"], tmp_path / "tasks")
    assert not (tmp_path / "tasks").exists()
