"""Training on the hop-k induction probe: token accuracy and validation loss on its dense targets, checked
with oracle models, and a run on a mixture that records token accuracy by k and resumes bit for bit."""

import numpy as np
import pytest
import torch

from depthwidth.data import BatchStream, load_dataset
from depthwidth.data.hops import ALPHABET, IGNORE, hop_target_array
from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig, train
from depthwidth.train.evaluate import evaluate
from depthwidth.train.probe_eval import dense_accuracy

LETTER_IDS = torch.tensor([ord(c) for c in ALPHABET + "~"])


class HopOracle(torch.nn.Module):
    """Reads k and the letters of a byte-tokenized hops row and predicts every target (or always NONE)."""

    def __init__(self, *, always_none: bool = False):
        super().__init__()
        self.always_none = always_none

    def forward(self, x):  # (B, T) -> (B, T, 256) one-hot logits
        k = (x[:, 0] - ord("0")).numpy()
        letters = np.searchsorted(LETTER_IDS[:4].numpy(), x[:, 1:].numpy())  # 'a'..'d' -> 0..3
        targets = hop_target_array(letters, k)  # (B, T-1)
        if self.always_none:
            targets = np.full_like(targets, len(ALPHABET))
        ids = torch.cat([x[:, :1], LETTER_IDS[torch.from_numpy(targets)]], dim=1)
        return torch.nn.functional.one_hot(ids, 256).float() * 20.0, None


class Bigram(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(256, 256)

    def forward(self, x):
        return self.table(x), None


@pytest.fixture
def hops_stream(tmp_path):
    ds = load_dataset(corpus="probe:hops:0,1,2:0,1,2,3@60", cache_dir=tmp_path / "c")
    return ds, BatchStream(ds, seq_len=32, batch_size=4, seed=0)


def test_token_accuracy_of_oracles(hops_stream):
    _, stream = hops_stream
    probe = stream.dense[0]
    assert dense_accuracy(HopOracle(), probe, seq_len=32, batch_size=7) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
    acc = dense_accuracy(HopOracle(always_none=True), probe, seq_len=32)
    for k in probe.test_ks:
        _, y = probe.held_out(k=k, split="test", rows=probe.n_test, seq_len=32)
        scored = y[:, 1:]  # the first position names k and is never scored
        assert (y[:, 0] == IGNORE).all()
        assert acc[k] == np.mean(scored == ord("~"))
    assert acc[0] == 0.0 and 0.2 < acc[2] < acc[3] < 1.0  # more hops run off the start more often


def test_validation_loss_of_a_dense_slice_skips_unscored_positions(hops_stream):
    _, stream = hops_stream
    (s,) = stream.eval_slices(6)
    x, y = s.rows
    torch.manual_seed(0)
    model = Bigram()
    out = evaluate(model, tokens=np.zeros(0, dtype=np.int64), slices=(s,), seq_len=32, batch_size=4,
                   device=torch.device("cpu"))
    with torch.no_grad():
        logits = model.table(torch.from_numpy(x))  # (6, 32, 256)
    by_token = torch.nn.functional.cross_entropy(logits[:, 1:].flatten(0, 1), torch.from_numpy(y[:, 1:]).flatten())
    assert out.loss == pytest.approx(float(by_token), rel=1e-6)
    assert out.by_slice == {s.name: out.loss} and out.windows == 6
    first = torch.nn.functional.cross_entropy(logits[:, 1:4].flatten(0, 1), torch.from_numpy(y[:, 1:4]).flatten())
    assert out.by_position[0] == pytest.approx(float(first), rel=1e-6)  # bucket [0, 4) without position 0


def _config(tmp_path, **kw):
    corpus = tmp_path / "text.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 400)
    return TrainConfig(corpus=f"{corpus}+probe:hops:0,1:0,1,2@60", seq_len=32, batch_size=8, steps=8, threads=1,
                       eval_windows=6, lr=3e-3, cache_dir=str(tmp_path / "cache"), peak_flops=1e11, **kw)


class Stop(Exception):
    pass


def test_a_mixture_run_reports_token_accuracy_by_k_and_resumes_bit_for_bit(tmp_path):
    shape = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32, pos="rope")
    config = _config(tmp_path, checkpoint_every=4)
    reference = train(shape, config, out_dir=tmp_path / "reference")
    assert reference.status == "completed"
    assert set(reference.probe_accuracy) == {"hops"} and set(reference.probe_accuracy["hops"]) == {"0", "1", "2"}
    assert all(0.0 <= a <= 1.0 for a in reference.probe_accuracy["hops"].values())
    assert set(reference.val_loss_by_slice) == {"text.txt", "probe:hops:0,1:0,1,2@60"}

    def stop_at_six(p):
        if p.phase == "train" and p.step == 6:
            raise Stop

    with pytest.raises(Stop):
        train(shape, config, out_dir=tmp_path / "stopped", progress=stop_at_six)
    resumed = train(shape, config, out_dir=tmp_path / "stopped", resume=True)
    numbers = lambda r: [(c["step"], c["loss"], c["grad_norm"]) for c in r.curve]  # noqa: E731
    assert numbers(resumed) == numbers(reference)
    assert resumed.val_loss_by_slice == reference.val_loss_by_slice
    assert resumed.probe_accuracy == reference.probe_accuracy
    assert resumed.batch_stream_hash == reference.batch_stream_hash
