import hashlib

import numpy as np
import pytest

from depthwidth.data import BatchStream, batch_positions, eval_positions, gather_windows, load_dataset


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("".join(chr(97 + (i * 7) % 26) for i in range(5000)))
    return load_dataset(corpus=path, cache_dir=tmp_path / "c")


def test_positions_are_a_pure_function_of_seed_and_step():
    kw = dict(n_tokens=1000, seq_len=16, batch_size=8)
    a = batch_positions(**kw, seed=1, step=5)
    np.testing.assert_array_equal(a, batch_positions(**kw, seed=1, step=5))
    assert not np.array_equal(a, batch_positions(**kw, seed=1, step=6))
    assert not np.array_equal(a, batch_positions(**kw, seed=2, step=5))
    assert a.dtype == np.int64 and a.shape == (8,)
    many = np.concatenate([batch_positions(**kw, seed=0, step=s) for s in range(200)])
    assert many.min() >= 0 and many.max() <= 1000 - 16 - 1
    assert many.max() > 900 and many.min() < 100  # the whole range is used


def test_windows_inputs_and_targets_are_shifted_by_one():
    tokens = np.arange(100, dtype=np.uint16)
    x, y = gather_windows(tokens, np.array([0, 50]), 8)
    np.testing.assert_array_equal(x[1], np.arange(50, 58))
    np.testing.assert_array_equal(y[1], np.arange(51, 59))
    assert x.dtype == np.int64


def test_eval_windows_evenly_spaced_inside_the_span():
    pos = eval_positions(start=100, end=1100, seq_len=99, count=5)
    assert pos.tolist() == [100, 325, 550, 775, 1000]  # last start = 1100 - 99 - 1
    assert eval_positions(start=0, end=12, seq_len=9, count=10).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        eval_positions(start=0, end=5, seq_len=9, count=1)


def test_stream_hash_covers_every_step_and_setting(dataset):
    stream = BatchStream(dataset, seq_len=16, batch_size=4, seed=0)
    h = hashlib.sha256(stream.header())
    for step in range(10):
        h.update(stream.positions(step).astype("<i8").tobytes())
    assert stream.stream_hash(10) == h.hexdigest()
    assert stream.stream_hash(10) != stream.stream_hash(11)
    for other in (dict(seq_len=17, batch_size=4, seed=0), dict(seq_len=16, batch_size=5, seed=0),
                  dict(seq_len=16, batch_size=4, seed=1)):
        assert BatchStream(dataset, **other).stream_hash(10) != stream.stream_hash(10)


def test_corpus_smaller_than_one_batch_is_refused(dataset):
    n = len(dataset.train)
    with pytest.raises(ValueError, match="fewer than one batch"):
        BatchStream(dataset, seq_len=n // 2, batch_size=4, seed=0)


def test_eval_slices_refuse_a_too_short_validation_split(dataset):
    stream = BatchStream(dataset, seq_len=600, batch_size=1, seed=0)  # val has 500 tokens
    with pytest.raises(ValueError, match="raise val_fraction or lower seq_len"):
        stream.eval_slices(4)
