"""Checkpoints: exact round trips, atomic writes, clear errors for bad files."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import minitrans
from minitrans.model.config import ModelConfig
from minitrans.model.transformer import Transformer
from minitrans.training import checkpoint, experiment
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
    assert records == {"model_config": model.config.to_dict(), "step": 3, "format_version": 2}
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
    objects = {"format": np.array(checkpoint.FORMAT), "param/evil": np.array([object()])}
    np.savez(path, **objects)
    with pytest.raises(CheckpointError, match="'param/evil.npy' has dtype object"):
        load_checkpoint(path)


# ------------------------------------------------------------ format versions

DATA = pathlib.Path(__file__).parent / "data"
V1_EXPECTED = json.loads((DATA / "v1_expected.json").read_text())


def test_a_saved_checkpoint_records_its_format_version(tmp_path):
    _save_model(tmp_path / "model.npz", _model())
    with np.load(tmp_path / "model.npz") as stored:
        assert json.loads(str(stored["json/format_version"])) == checkpoint.FORMAT_VERSION == 2


def test_version_1_names_become_the_paper_s_names():
    old_and_new = {
        "param/encoder.layers.0.self_attn.sublayer.W_Q": "param/encoder.layers.0.self_attn.W_Q.W",
        "param/decoder.layers.1.cross_attn.sublayer.b_V": "param/decoder.layers.1.cross_attn.W_V.b",
        "optim/m/decoder.layers.0.feed_forward.sublayer.W_2":
            "optim/m/decoder.layers.0.feed_forward.W_2.W",
        "optim/v/encoder.layers.0.feed_forward.sublayer.b_1":
            "optim/v/encoder.layers.0.feed_forward.W_1.b",
        "param/decoder.layers.0.cross_attn.norm.gamma":
            "param/decoder.layers.0.cross_attn_norm.layer_norm.gamma",
        "optim/velocity/encoder.layers.0.feed_forward.norm.beta":
            "optim/velocity/encoder.layers.0.feed_forward_norm.layer_norm.beta",
        "param/encoder.final_norm.gamma": "param/encoder.final_norm.gamma",
        "param/generator.W": "param/generator.W",
        "param/src_embed.embedding.W_E": "param/src_embed.embedding.W_E",
    }
    for old, new in old_and_new.items():
        assert checkpoint.upgrade_name_v1(old) == new


@pytest.mark.parametrize("name", ["copy", "lm"])
def test_a_real_version_1_checkpoint_gives_the_logits_the_old_code_gave(name):
    """v1_*.npz were written, and their logits computed, by the minitrans of
    before format version 2 (tests/data/README.md). Float32: the query, key
    and value products, once one fused product, may round differently."""
    path = DATA / f"v1_{name}.npz"
    with np.load(path) as stored:
        assert "json/format_version" not in stored.files  # a real version-1 file
        assert "param/decoder.layers.0.self_attn.sublayer.W_Q" in stored.files
    expected = V1_EXPECTED[name]
    with minitrans.using("numpy", dtype="float32"):
        model, _ = experiment.load_trained(path)
        inputs = [np.array(expected[key]) for key in ("src", "tgt_in", "ids") if key in expected]
        logits = minitrans.to_numpy(model.forward(*inputs))
    want = np.array(expected["logits"], dtype=np.float32).reshape(expected["shape"])
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)


def test_a_version_1_checkpoint_without_conversion_would_not_load():
    """The conversion is what makes it load: the old names alone are refused."""
    path = DATA / "v1_copy.npz"
    with np.load(path) as stored:
        arrays = {key: stored[key] for key in stored.files if key.startswith("param/")}
    with minitrans.using("numpy", dtype="float32"):
        model, _ = experiment.load_trained(path)
        with pytest.raises(CheckpointError, match="missing parameters"):
            load_parameters(model, arrays, path)


def test_a_version_1_checkpoint_resumes_as_before(tmp_path):
    """Parameters and Adam's moments are renamed: the next step's loss is the
    one the old code computed after resuming."""
    path = tmp_path / "v1_copy.npz"
    path.write_bytes((DATA / "v1_copy.npz").read_bytes())
    with minitrans.using("numpy", dtype="float32"):
        trainer = experiment.resume_trainer(path, steps=3, progress=False, log=lambda m: None)
        assert trainer.step == 2 and trainer.optimizer.step_count == 2
        loss, tokens = trainer.train_step()
    assert tokens == 44
    assert loss == pytest.approx(V1_EXPECTED["copy"]["resumed_step_3_loss"], rel=1e-5)


def test_the_cli_translates_with_a_version_1_checkpoint():
    expected = V1_EXPECTED["copy"]["translate"]
    for options, key in (([], "greedy"), (["--beam", "3"], "beam_3")):
        result = subprocess.run(
            [sys.executable, "-m", "minitrans", "translate", "--checkpoint",
             str(DATA / "v1_copy.npz"), *options],
            input="\n".join(expected["sentences"]) + "\n", capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == expected[key]


def test_a_newer_format_version_is_refused_in_one_line(tmp_path):
    with np.load(DATA / "v1_copy.npz") as stored:
        entries = {key: stored[key] for key in stored.files}
    entries["json/format_version"] = np.array(json.dumps(3))
    path = tmp_path / "future.npz"
    np.savez(path, **entries)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in ("future.npz", "format version 3", "upgrade minitrans"):
        assert fragment in message, message
