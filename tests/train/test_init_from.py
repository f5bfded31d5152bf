"""`TrainConfig.init_from`: a run that starts from a local Hugging Face checkpoint. Unset, it changes no
earlier identity (hashes pinned from before the field existed); set, the run starts from exactly the
folder's weights, its content hash is part of a study's run id, and a resume refuses a changed folder."""

from __future__ import annotations

import shutil

import pytest
import torch

from depthwidth.errors import UserError
from depthwidth.shapes.shape import Shape
from depthwidth.study.run_config import config_hash, train_run_config
from depthwidth.artifact.config import TrainConfig

pytest.importorskip("safetensors")


def test_unset_init_from_keeps_every_earlier_hash():
    # both values were computed with the code before init_from existed, whose runs stepped the foreach AdamW
    # (`adamw`, added later with a new default, is left out of the identity at "foreach")
    assert (TrainConfig(steps=5, adamw="foreach").config_hash()
            == "9c9519c8299423a2e258d8f0e26c0ae633f5bf44cf21791baba1891800033b6c")
    assert TrainConfig(steps=5).config_hash() != "9c9519c8299423a2e258d8f0e26c0ae633f5bf44cf21791baba1891800033b6c"
    config = TrainConfig(corpus="python-docs", tokens=4096, lr=2e-3, seed=3, adamw="foreach")
    stored = train_run_config(shape={"n_layers": 2}, corpus_hash="c0ffee", config=config)
    assert "init_from" not in stored["train"] and "init_hash" not in stored
    assert config_hash(stored) == "38b9aca294695f88533dbcb70f269b4fc37ddfd71072c00ce317c4159069130b"


def test_a_study_run_id_carries_the_folder_content_not_only_its_path():
    config = TrainConfig(steps=5, init_from="/models/a")
    with pytest.raises(ValueError, match="needs the content hash"):
        train_run_config(shape={}, corpus_hash="c", config=config)
    one = train_run_config(shape={}, corpus_hash="c", config=config, init_hash="1" * 64)
    two = train_run_config(shape={}, corpus_hash="c", config=config, init_hash="2" * 64)
    assert one["train"]["init_from"] == "/models/a" and config_hash(one) != config_hash(two)
    with pytest.raises(UserError, match="init_from='' must be the path"):
        TrainConfig(steps=5, init_from="")


SHAPE = Shape(n_layers=2, d_model=32, n_heads=2, vocab_size=256, max_seq_len=32)


@pytest.fixture
def exported(tmp_path, corpus_file, tiny_config):
    """A 12-step run of SHAPE and its export."""
    from depthwidth.hf.export import export_run
    from depthwidth.train.loop import train

    train(SHAPE, tiny_config, out_dir=tmp_path / "a")
    export_run(tmp_path / "a", tmp_path / "hf")
    return tmp_path / "a", tmp_path / "hf"


def _first_batch_loss(run_dir, config: TrainConfig) -> float:
    """The loss of a run folder's model on step 0's batch, computed as the trainer does."""
    from depthwidth.bench.target import load_checkpoint_model
    from depthwidth.data.batches import BatchStream, gather_windows
    from depthwidth.data.dataset import load_dataset

    dataset = load_dataset(corpus=config.corpus, cache_dir=config.cache_dir)
    stream = BatchStream(dataset, seq_len=config.seq_len, batch_size=config.batch_size, seed=config.seed)
    x, y = gather_windows(stream.tokens, stream.positions(0), config.seq_len)
    model = load_checkpoint_model(run_dir).model.train()
    with torch.no_grad():
        return model(torch.from_numpy(x), torch.from_numpy(y))[1].item()


def test_a_run_from_an_export_starts_from_its_weights_bit_for_bit(exported, tiny_config, tmp_path):
    from depthwidth.hfio.load import read_hf_checkpoint
    from depthwidth.train.loop import train

    run_a, hf = exported
    config = tiny_config.with_(init_from=str(hf), steps=3)
    result = train(SHAPE, config, out_dir=tmp_path / "b")
    assert result.status == "completed"
    assert result.curve[0]["loss"] == _first_batch_loss(run_a, config)  # step 0 ran on run a's weights
    init = read_hf_checkpoint(hf)
    payload = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert '"init_sha256": "' + init.sha256 + '"' in payload["meta"]


def test_a_resume_refuses_a_folder_whose_content_changed(exported, tiny_config, tmp_path):
    from depthwidth.hf.export import export_run
    from depthwidth.train.loop import train

    run_a, hf = exported
    config = tiny_config.with_(init_from=str(hf), steps=4, checkpoint_every=2)
    train(SHAPE, config, out_dir=tmp_path / "b")
    (tmp_path / "b" / "result.json").unlink()  # as if killed after its last checkpoint
    other = tmp_path / "other"
    train(SHAPE, tiny_config.with_(seed=1), out_dir=other)
    shutil.rmtree(hf)
    export_run(other, hf)  # the same path, other weights
    with pytest.raises(UserError, match=r"started from weights with hash [0-9a-f]{12}, but init_from now has"):
        train(SHAPE, config, out_dir=tmp_path / "b", resume=True)


def test_a_shape_or_tokenizer_that_is_not_the_checkpoints_is_refused(exported, tiny_config, tmp_path):
    from depthwidth.train.loop import train

    _, hf = exported
    with pytest.raises(UserError, match=r"holds shape L2-H32-A2, not this run's L3-H32-A2 \(n_layers=2 there, 3 here\)"):
        train(SHAPE.with_(n_layers=3), tiny_config.with_(init_from=str(hf)), out_dir=tmp_path / "c")
    with pytest.raises(UserError, match="was trained with tokenizer byte, but this run tokenizes with char:"):
        train(SHAPE, tiny_config.with_(init_from=str(hf), tokenizer="char"), out_dir=tmp_path / "d")
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()  # refused before anything is written


def test_an_export_with_folded_multipliers_continues_as_sp_only(tmp_path, tiny_config):
    """A CompleteP run's export holds its multipliers in its weights: continued as SP it starts from the
    trained function (the first loss equals the run's model on that batch); as CompleteP it is refused."""
    from depthwidth.hf.export import export_run
    from depthwidth.train.loop import train

    completep = tiny_config.with_(parametrization="completep", base_width=16, base_depth=1, steps=4)
    train(SHAPE, completep, out_dir=tmp_path / "cp")
    export_run(tmp_path / "cp", tmp_path / "hf")
    with pytest.raises(UserError) as err:
        train(SHAPE, completep.with_(init_from=str(tmp_path / "hf")), out_dir=tmp_path / "again")
    assert "completep multipliers folded into the weights" in str(err.value) and "parametrization='sp'" in \
        str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "again").exists()
    sp = tiny_config.with_(init_from=str(tmp_path / "hf"), steps=2)
    result = train(SHAPE, sp, out_dir=tmp_path / "sp")
    assert result.curve[0]["loss"] == pytest.approx(_first_batch_loss(tmp_path / "cp", sp), rel=1e-5)
