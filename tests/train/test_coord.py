"""The coordinate check on tiny models: what it records, and that it separates SP from muP over width."""

from __future__ import annotations

import pytest

from depthwidth.data.dataset import load_dataset
from depthwidth.errors import UserError
from depthwidth.train.coord import coord_check


@pytest.fixture
def dataset(corpus_file, tmp_path):
    return load_dataset(corpus=str(corpus_file), cache_dir=tmp_path / "cache")


def test_sp_grows_with_width_and_mup_does_not(dataset):
    r = coord_check(widths=(16, 64), depths=(2,), parametrizations=("sp", "mup", "completep", "depth-mup"), steps=3,
                    lr=1e-2, head_dim=8, seq_len=16, batch_size=4, dataset=dataset)
    assert len(r.points) == 8 and all(len(p.layers) == 2 == len(p.layer_update) for p in r.points)
    sp, mup = r.growth("sp", over="width"), r.growth("mup", over="width")
    assert sp > 3 and mup < 1.6 and sp > 3 * mup  # SP's residual stream grows with width (9.5x here), muP's ~1.3x
    by = {(p.parametrization, p.width): p for p in r.points}
    for w in (16, 64):  # at the base depth (m_L = 1) the depth-aware schemes are muP exactly
        assert by[("completep", w)].layers == by[("mup", w)].layers == by[("depth-mup", w)].layers
    assert by[("sp", 16)].layers != by[("mup", 16)].layers  # 1/head_dim attention and init differ even at m = 1
    assert r.growth("sp", over="depth") is None  # one depth: no growth over depth


def test_bad_sizes_are_user_errors(dataset):
    with pytest.raises(UserError, match="multiples of --head-dim 8"):
        coord_check(widths=(12,), depths=(1,), parametrizations=("sp",), head_dim=8, dataset=dataset)
    with pytest.raises(UserError, match="--parametrization 'umup'"):
        coord_check(widths=(16,), depths=(1,), parametrizations=("umup",), head_dim=8, dataset=dataset)
