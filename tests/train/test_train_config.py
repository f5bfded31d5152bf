import math

import pytest

from depthwidth.train import TrainConfig, lr_at


def test_budget_in_tokens_rounds_up_to_whole_steps():
    c = TrainConfig(tokens=10_000, seq_len=64, batch_size=12)
    assert c.tokens_per_step == 768
    assert c.total_steps == 14  # ceil(10000 / 768)
    assert TrainConfig(steps=7).total_steps == 7


def test_classic_schedule_warmup_then_cosine_to_min_lr():
    c = TrainConfig(steps=2000, lr=1e-3, min_lr=1e-4, warmup=100)
    assert lr_at(c, 0) == pytest.approx(1e-5)
    assert lr_at(c, 99) == pytest.approx(1e-3)
    assert lr_at(c, 100) == pytest.approx(1e-3)
    mid = 100 + (2000 - 1 - 100) / 2
    assert lr_at(c, int(mid)) == pytest.approx(1e-4 + 0.5 * (1 + math.cos(math.pi * (int(mid) - 100) / 1899)) * 9e-4)
    assert lr_at(c, 1999) == pytest.approx(1e-4)


def test_linear_and_constant_schedules():
    lin = TrainConfig(steps=11, lr=1.0, min_lr=0.0, schedule="linear")
    assert [round(lr_at(lin, s), 6) for s in (0, 5, 10)] == [1.0, 0.5, 0.0]
    const = TrainConfig(steps=10, lr=0.5, schedule="constant", warmup=2)
    assert [lr_at(const, s) for s in (0, 1, 2, 9)] == [0.25, 0.5, 0.5, 0.5]
    assert TrainConfig(steps=10, lr=2e-3).final_lr == pytest.approx(2e-4)


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(steps=None), "steps"),
        (dict(tokens=100), "tokens"),
        (dict(lr=0.0), "lr"),
        (dict(lr=float("nan")), "lr"),
        (dict(min_lr=1.0), "min_lr"),
        (dict(beta2=1.0), "beta2"),
        (dict(schedule="step"), "schedule"),
        (dict(dtype="fp64"), "dtype"),
        (dict(micro_batch=5), "micro_batch"),
        (dict(seq_len=0), "seq_len"),
        (dict(dropout=1.0), "dropout"),
        (dict(warmup=10), "warmup"),
        (dict(tokenizer="sentencepiece"), "tokenizer"),
        (dict(val_fraction=0.0), "val_fraction"),
        (dict(threads=0), "threads"),
        (dict(eval_windows=0), "eval_windows"),
        (dict(weight_decay=-0.1), "weight_decay"),
        (dict(attn_impl="flash"), "attn_impl"),
    ],
)
def test_bad_values_name_the_field(changes, field):
    base = dict(steps=10)
    base.update(changes)
    with pytest.raises(ValueError, match=field):
        TrainConfig(**base)


@pytest.mark.parametrize("field", ["dtype", "cuda_dtype"])
def test_fp16_is_not_offered_for_training_on_any_device(field):
    # fp16 training needs loss scaling, which the trainer does not do: it is refused when the config is made
    with pytest.raises(ValueError, match=f"^{field}='fp16' is not allowed; expected (one of )?fp32(, | or )bf16$"):
        TrainConfig(steps=1, device="cuda", **{field: "fp16"})
    assert TrainConfig(steps=1, **{field: "bf16"}).to_dict()[field] == "bf16"


def test_round_trip_and_hash_ignores_bookkeeping_fields():
    c = TrainConfig(steps=10, lr=3e-4)
    assert TrainConfig.from_dict(c.to_dict()) == c
    assert c.with_(checkpoint_every=5, cache_dir="/x").config_hash() == c.config_hash()
    assert c.with_(seed=1).config_hash() != c.config_hash()
    with pytest.raises(ValueError, match="unknown train config field"):
        TrainConfig.from_dict({"steps": 1, "learning_rate": 1.0})
