"""Probe accuracy: alignment of answer positions checked with oracle models that read the
teacher-forced input, and probe corpora as slices."""

import torch

from depthwidth.data.corpora import load_corpus
from depthwidth.data.probes import generate, parse_probe_spec, probe_test_set
from depthwidth.data.tokenizers import ByteTokenizer
from depthwidth.shapes import Shape
from depthwidth.train.probe_eval import probe_accuracy


class Oracle(torch.nn.Module):
    """Predicts at position p the token at p + shift of its own input (shift=1: always right)."""

    def __init__(self, *, shift: int, wrong_on_digit: str | None = None):
        super().__init__()
        self.shape = Shape(n_layers=1, d_model=8, n_heads=1, vocab_size=256, max_seq_len=512)
        self.shift, self.wrong_on_digit = shift, wrong_on_digit

    def forward(self, x):
        target = torch.roll(x, -self.shift, dims=1)
        if self.wrong_on_digit is not None:  # sabotage: predict 'x' whenever the true next token is this digit
            target = torch.where(target == ord(self.wrong_on_digit), torch.full_like(target, ord("x")), target)
        return torch.nn.functional.one_hot(target, 256).float(), None


def test_oracle_is_perfect_and_copier_is_wrong():
    examples = generate("addition", difficulty=3, n=50, seed=0) + generate("multihop", difficulty=2, n=30, seed=0)
    tok = ByteTokenizer()
    perfect = probe_accuracy(Oracle(shift=1), tokenizer=tok, examples=examples, batch_size=7)
    assert perfect == {"addition": {3: 1.0}, "multihop": {2: 1.0}}
    copier = probe_accuracy(Oracle(shift=0), tokenizer=tok, examples=examples)
    assert copier["multihop"][2] == 0.0  # the next letter is never the current '='


def test_accuracy_counts_only_answer_tokens():
    examples = generate("parity", difficulty=6, n=200, seed=1)
    tok = ByteTokenizer()
    # wrong whenever the next token is '1': prompts are full of 1s, but only the answer counts
    acc = probe_accuracy(Oracle(shift=1, wrong_on_digit="1"), tokenizer=tok, examples=examples)[ "parity"][6]
    expected = sum(ex.answer == "0" for ex in examples) / len(examples)
    assert acc == expected and 0.2 < acc < 0.8


def test_probe_corpus_is_a_named_slice_and_deterministic():
    a = load_corpus("probe:recall:2,4")
    b = load_corpus("probe:recall:2,4")
    assert a.sha256 == b.sha256 and a.slices[0].kind == "probe" and a.slices[0].name == "probe:recall:2,4"
    assert load_corpus("probe:recall:2,4@100").sha256 != a.sha256
    spec = parse_probe_spec("probe:multihop:1,2:3@10")
    assert spec.train_difficulties == (1, 2) and spec.test_difficulties == (3,) and spec.n_train == 10
    assert {e.difficulty for e in probe_test_set(spec)} == {3}


def test_training_on_a_probe_reports_accuracy_per_difficulty(tmp_path):
    from depthwidth.train import TrainConfig, train

    shape = Shape(n_layers=1, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)
    config = TrainConfig(corpus="probe:parity:2,3:2,3,4@40", seq_len=32, batch_size=4, steps=3, threads=1,
                         eval_windows=4, cache_dir=str(tmp_path), peak_flops=1e11)
    result = train(shape, config)
    assert result.status == "completed"
    assert set(result.probe_accuracy) == {"parity"} and set(result.probe_accuracy["parity"]) == {"2", "3", "4"}
    assert all(0.0 <= a <= 1.0 for a in result.probe_accuracy["parity"].values())
    assert "probe:parity:2,3:2,3,4@40" in result.val_loss_by_slice
