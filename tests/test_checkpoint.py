"""Checkpoints: exact round trips, atomic writes, clear errors for bad files."""

import os

import numpy as np
import pytest

import minitrans
from minitrans.model.config import ModelConfig
from minitrans.model.transformer import Transformer
from minitrans.training import checkpoint
from minitrans.training.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_parameters,
    save_checkpoint,
)


def _model(**sizes):
    return Transformer(ModelConfig.preset("tiny", vocab_size=7, **sizes), rng=0)


def _save_model(path, model):
    arrays = {f"param/{name}": value for name, value, _ in model.named_parameters()}
    save_checkpoint(path, arrays, {"model_config": model.config.to_dict(), "step": 3})


def test_round_trip_is_exact(backend_name, tmp_path):
    model = _model()
    path = tmp_path / "model.npz"
    _save_model(path, model)
    arrays, records = load_checkpoint(path)
    assert records == {"model_config": model.config.to_dict(), "step": 3}
    copy = Transformer(ModelConfig.from_dict(records["model_config"]), rng=1)
    load_parameters(copy, arrays, path)
    for (name, value, _), (_, restored, _) in zip(
        model.named_parameters(), copy.named_parameters()
    ):
        np.testing.assert_array_equal(
            minitrans.to_numpy(restored), minitrans.to_numpy(value), err_msg=name
        )


def test_a_failed_write_leaves_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    _save_model(path, _model())
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        _save_model(path, _model())
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.npz"]


def test_missing_truncated_and_foreign_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="nothing.npz: checkpoint not found"):
        load_checkpoint(tmp_path / "nothing.npz")
    good = tmp_path / "good.npz"
    _save_model(good, _model())
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    with pytest.raises(CheckpointError, match="truncated.npz: not a readable checkpoint"):
        load_checkpoint(truncated)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="notes.txt: not a readable checkpoint"):
        load_checkpoint(text)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.ones(3))
    with pytest.raises(CheckpointError, match="foreign.npz: not a minitrans checkpoint"):
        load_checkpoint(foreign)


def test_a_checkpoint_of_another_config_or_with_a_missing_array_is_refused(tmp_path):
    path = tmp_path / "model.npz"
    _save_model(path, _model())
    arrays, _ = load_checkpoint(path)
    with pytest.raises(CheckpointError, match="another model configuration: .* has shape"):
        load_parameters(_model(d_ff=32), arrays, path)
    del arrays["param/generator.b"]
    with pytest.raises(CheckpointError, match="missing parameters: param/generator.b"):
        load_parameters(_model(), arrays, path)


def test_loading_never_unpickles(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, format=np.array(checkpoint.FORMAT), evil=np.array([object()], dtype=object))
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)
