"""Every multiplier of `depthwidth.shapes.parametrization.multipliers` against values worked out by hand from
CompleteP's Table 1 (arXiv 2505.01618) for two (width, depth) pairs:

    A: d_model 256, n_layers 8, base 64 x 2, head_dim 32   -> m_N = 4, m_L = 4
    B: d_model 96,  n_layers 3, base 32 x 12, head_dim 16  -> m_N = 3, m_L = 1/4 (shallower than the base)
"""

from __future__ import annotations

import math

import pytest

from depthwidth.errors import UserError
from depthwidth.shapes.parametrization import PARAMETRIZATIONS, ROLES, multipliers

A = {"d_model": 256, "n_layers": 8, "head_dim": 32, "base_width": 64, "base_depth": 2}
B = {"d_model": 96, "n_layers": 3, "head_dim": 16, "base_width": 32, "base_depth": 12}

#: (pair, parametrization) -> hand-computed factors:
#: hidden std, residual-out std, residual mult, logit mult, attn scale, LR hidden, LR hidden vectors, WD hidden, eps
EXPECTED = {
    ("A", "sp"): (0.02, 0.02 / 4, 1, 1, None, 1, 1, 1, 1),  # GPT-2: 0.02 / sqrt(2 * 8)
    ("A", "mup"): (0.01, 0.01, 1, 1 / 4, 1 / 32, 1 / 4, 1, 4, 1 / 4),  # 0.02 / sqrt(4); eps / m_N
    ("A", "completep"): (0.01, 0.01, 1 / 4, 1 / 4, 1 / 32, 1 / 4, 1, 4, 1 / 16),  # LR m_N^-1 m_L^0; eps/(m_N m_L)
    ("A", "depth-mup"): (0.01, 0.01, 1 / 2, 1 / 4, 1 / 32, 1 / 8, 1 / 2, 4, 1 / 8),  # m_L^-1/2 = 1/2
    ("B", "sp"): (0.02, 0.02 / math.sqrt(6), 1, 1, None, 1, 1, 1, 1),
    ("B", "mup"): (0.02 / math.sqrt(3), 0.02 / math.sqrt(3), 1, 1 / 3, 1 / 16, 1 / 3, 1, 3, 1 / 3),
    ("B", "completep"): (0.02 / math.sqrt(3), 0.02 / math.sqrt(3), 4, 1 / 3, 1 / 16, 1 / 3, 1, 3, 4 / 3),
    ("B", "depth-mup"): (0.02 / math.sqrt(3), 0.02 / math.sqrt(3), 2, 1 / 3, 1 / 16, 2 / 3, 2, 3, 2 / 3),
}


@pytest.mark.parametrize("pair,name", sorted(EXPECTED))
def test_every_factor_matches_the_hand_computed_table(pair, name):
    m = multipliers(name, **(A if pair == "A" else B))
    hidden, resid, branch, logit, attn, lr_h, lr_v, wd_h, eps = EXPECTED[(pair, name)]
    assert m.hidden_init_std == pytest.approx(hidden, rel=1e-12)
    assert m.residual_out_init_std == pytest.approx(resid, rel=1e-12)
    assert m.embed_init_std == 0.02  # embeddings and the untied head keep sigma_base (Table 1)
    assert m.residual_mult == pytest.approx(branch, rel=1e-12)
    assert m.logit_mult == pytest.approx(logit, rel=1e-12)
    assert m.attn_scale == (None if attn is None else pytest.approx(attn, rel=1e-12))
    assert m.lr["hidden"] == pytest.approx(lr_h, rel=1e-12)
    assert m.lr["hidden_vector"] == pytest.approx(lr_v, rel=1e-12)
    assert m.lr["embedding"] == m.lr["final_norm"] == m.lr["head"] == 1.0
    assert m.weight_decay["hidden"] == pytest.approx(wd_h, rel=1e-12)
    assert all(m.weight_decay[r] == 1.0 for r in ROLES if r != "hidden")
    assert m.eps == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("pair", ["A", "B"])
def test_lr_times_weight_decay_of_hidden_matrices(pair):
    """Table 1 scales hidden WD by m_N: eta*lambda is free of width for every scheme and free of depth under
    CompleteP (alpha = 1); depth-muP keeps the m_L^-1/2 of its LR."""
    sizes = A if pair == "A" else B
    m_l = sizes["n_layers"] / sizes["base_depth"]
    for name, expected in (("mup", 1.0), ("completep", 1.0), ("depth-mup", m_l**-0.5)):
        m = multipliers(name, **sizes)
        assert m.lr["hidden"] * m.weight_decay["hidden"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", PARAMETRIZATIONS)
def test_at_the_base_sizes_every_optimizer_factor_is_one(name):
    m = multipliers(name, d_model=128, n_layers=6, head_dim=32)  # base = the model's own sizes
    assert (m.width_mult, m.depth_mult, m.residual_mult, m.logit_mult, m.eps) == (1, 1, 1, 1, 1)
    assert set(m.lr.values()) == set(m.weight_decay.values()) == {1.0}
    assert m.attn_scale == (None if name == "sp" else 1 / 32)


def test_mup_ignores_depth_and_sp_ignores_base_sizes():
    deep = multipliers("mup", d_model=256, n_layers=32, head_dim=32, base_width=64, base_depth=2)
    shallow = multipliers("mup", d_model=256, n_layers=2, head_dim=32, base_width=64, base_depth=2)
    assert (deep.lr, deep.eps, deep.residual_mult) == (shallow.lr, shallow.eps, shallow.residual_mult)
    sp = multipliers("sp", d_model=256, n_layers=8, head_dim=32, base_width=3, base_depth=1)
    plain = multipliers("sp", d_model=256, n_layers=8, head_dim=32).to_dict()
    assert {k: v for k, v in sp.to_dict().items() if k not in ("width_mult", "depth_mult")} == {
        k: v for k, v in plain.items() if k not in ("width_mult", "depth_mult")}


def test_refusals_are_one_line_user_errors():
    with pytest.raises(UserError, match="parametrization='umup' is not allowed"):
        multipliers("umup", d_model=64, n_layers=2, head_dim=16)
    for name in ("completep", "depth-mup"):
        with pytest.raises(UserError, match="norm_position='post'"):
            multipliers(name, d_model=64, n_layers=2, head_dim=16, norm_position="post")
    assert multipliers("mup", d_model=64, n_layers=2, head_dim=16, norm_position="post").residual_mult == 1.0
