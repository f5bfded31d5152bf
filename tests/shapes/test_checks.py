"""The shared argument checks, in particular the one rule for a budget that plan_family, the plan
command and the study spec all apply."""

import pytest

from depthwidth.errors import UserError
from depthwidth.shapes.checks import BUDGET_FIELDS, check_choice, check_int, check_one_budget

FLAGS = ("--params", "--flops", "--tokens", "--tokens-per-param")


@pytest.mark.parametrize("budget", [
    dict(params=124e6, flops=None, tokens=None, tokens_per_param=None),
    dict(params=None, flops=1e19, tokens=2e9, tokens_per_param=None),
    dict(params=None, flops=1e19, tokens=None, tokens_per_param=20),
])
def test_one_budget_passes(budget):
    assert check_one_budget(**budget) is None
    assert check_one_budget(**budget, names=FLAGS) is None


@pytest.mark.parametrize("budget, got", [
    (dict(params=None, flops=None, tokens=None, tokens_per_param=None), "none"),
    (dict(params=1, flops=1, tokens=None, tokens_per_param=None), "params, flops"),
    (dict(params=1, flops=None, tokens=5, tokens_per_param=None), "params, tokens"),
    (dict(params=1, flops=None, tokens=None, tokens_per_param=20), "params, tokens_per_param"),
    (dict(params=None, flops=1, tokens=None, tokens_per_param=None), "flops"),
    (dict(params=None, flops=1, tokens=5, tokens_per_param=20), "flops, tokens, tokens_per_param"),
    (dict(params=None, flops=None, tokens=5, tokens_per_param=None), "tokens"),
])
def test_anything_else_is_one_message_naming_the_fields(budget, got):
    with pytest.raises(UserError) as err:
        check_one_budget(**budget)
    assert str(err.value) == (
        f"give one budget: params alone, or flops with exactly one of tokens or tokens_per_param (got {got})"
    )


def test_the_caller_names_the_fields():
    with pytest.raises(UserError) as err:
        check_one_budget(params=None, flops=1e19, tokens=None, tokens_per_param=None, names=FLAGS)
    assert str(err.value) == (
        "give one budget: --params alone, or --flops with exactly one of --tokens or --tokens-per-param (got --flops)"
    )
    assert BUDGET_FIELDS == ("params", "flops", "tokens", "tokens_per_param")


def test_zero_is_given_not_missing():
    # a value counts as given when it is not None: 0 tokens is a (bad) tokens value, not "no tokens"
    with pytest.raises(UserError, match=r"\(got params, tokens\)"):
        check_one_budget(params=1, flops=None, tokens=0, tokens_per_param=None)


def test_int_and_choice_checks():
    check_int("n", 3)
    check_int("n", 0, low=0)
    with pytest.raises(UserError, match="n=True must be a positive integer"):
        check_int("n", True)
    with pytest.raises(UserError, match="n=-1 must be an integer >= 0"):
        check_int("n", -1, low=0)
    check_choice("ffn", "gelu", ("gelu", "swiglu"))
    with pytest.raises(UserError, match="ffn='geglu' is not allowed; expected one of gelu, swiglu"):
        check_choice("ffn", "geglu", ("gelu", "swiglu"))
