"""Checkpoints: exact round trips, atomic writes, clear errors for bad files."""

import json
import os
import pathlib
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

import minitrans
from minitrans.files import rules
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.training.run_files import checkpoint
from minitrans.training import experiment
from minitrans.training.run_files.records import check_records
from minitrans.training.trainer import TrainConfig
from minitrans.training.run_files.checkpoint import (
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
    assert records == {"model_config": model.config.to_dict(), "step": 3, "format_version": 3}
    copy = Transformer(ModelConfig.from_dict(records["model_config"]), rng=1)
    load_parameters(copy, arrays, path)
    for (name, value, _), (_, restored, _) in zip(
        model.named_parameters(), copy.named_parameters()
    ):
        np.testing.assert_array_equal(
            minitrans.to_numpy(restored), minitrans.to_numpy(value), err_msg=name
        )


def test_a_model_without_a_padding_token_is_saved_and_its_records_accepted(tmp_path):
    """pad_id=None (a pretrained GPT-2 or Llama) is a record's value like
    any other; a string or a negative id is still refused by name."""
    config = ModelConfig.preset("tiny", vocab_size=7, decoder_only=True, pad_id=None)
    path = tmp_path / "lm.npz"
    _save_model(path, DecoderOnlyLM(config, rng=0))
    arrays, records = load_checkpoint(path)
    check_records(path, records, arrays)
    assert ModelConfig.from_dict(records["model_config"]).pad_id is None
    for value in ("none", -1):
        records["model_config"]["pad_id"] = value
        with pytest.raises(CheckpointError, match="model_config.pad_id"):
            check_records(path, records, arrays)


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
    del arrays["param/output_projection.b"]
    with pytest.raises(CheckpointError, match="missing parameters: param/output_projection.b"):
        load_parameters(_model(), arrays, path)


def test_loading_never_unpickles(tmp_path):
    path = tmp_path / "objects.npz"
    objects = {"format": np.array(checkpoint.FORMAT), "param/evil": np.array([object()])}
    np.savez(path, **objects)
    with pytest.raises(CheckpointError, match="'param/evil.npy' has dtype object"):
        load_checkpoint(path)


# ------------------------------------------------------------ format versions

DATA = pathlib.Path(__file__).parent / "data"
EXPECTED = {version: json.loads((DATA / f"v{version}_expected.json").read_text())
            for version in (1, 2)}
# A name each old version stored that the current format spells otherwise.
OLD_NAMES = {1: "param/decoder.layers.0.self_attn.sublayer.W_Q", 2: "param/generator.W"}


def test_a_saved_checkpoint_records_its_format_version(tmp_path):
    _save_model(tmp_path / "model.npz", _model())
    with np.load(tmp_path / "model.npz") as stored:
        assert json.loads(str(stored["json/format_version"])) == checkpoint.FORMAT_VERSION == 3


def test_every_older_version_has_a_renaming_step():
    assert sorted(checkpoint.RENAMING_STEPS) == list(range(1, checkpoint.FORMAT_VERSION))


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
        "param/generator.W": "param/generator.W",  # renamed by the next step
        "param/src_embed.embedding.W_E": "param/src_embed.embedding.W_E",
    }
    for old, new in old_and_new.items():
        assert checkpoint.rename_v1_to_v2(old) == new


def test_version_2_names_become_the_output_projection_s():
    old_and_new = {
        "param/generator.W": "param/output_projection.W",
        "param/generator.b": "param/output_projection.b",
        "optim/m/generator.W": "optim/m/output_projection.W",
        "optim/v/generator.b": "optim/v/output_projection.b",
        "optim/velocity/generator.W": "optim/velocity/output_projection.W",
        "param/decoder.layers.0.self_attn.W_Q.W": "param/decoder.layers.0.self_attn.W_Q.W",
        "param/embed.embedding.W_E": "param/embed.embedding.W_E",
        "json/generator.W": "json/generator.W",  # not an array's name
    }
    for old, new in old_and_new.items():
        assert checkpoint.rename_v2_to_v3(old) == new


def test_old_names_are_upgraded_step_by_step_to_the_current_ones():
    assert checkpoint.upgrade_name("optim/m/generator.b", 1) == "optim/m/output_projection.b"
    assert checkpoint.upgrade_name("optim/v/generator.b", 2) == "optim/v/output_projection.b"
    v1 = "param/encoder.layers.0.self_attn.sublayer.b_O"
    assert checkpoint.upgrade_name(v1, 1) == "param/encoder.layers.0.self_attn.W_O.b"
    current = "param/output_projection.W"
    assert checkpoint.upgrade_name(current, checkpoint.FORMAT_VERSION) == current


def _stored(path):
    with np.load(path) as stored:
        return {key: stored[key] for key in stored.files}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("name", ["copy", "lm"])
def test_a_real_old_checkpoint_gives_the_logits_the_old_code_gave(version, name):
    """v1_*.npz and v2_*.npz were written, and their logits computed, by the
    minitrans of each format version (tests/library/data/README.md). Float32:
    the query, key and value products, once one fused product, may round
    differently."""
    path = DATA / f"v{version}_{name}.npz"
    stored = _stored(path)
    if version == 1:
        assert "json/format_version" not in stored  # version 1 had no record
    else:
        assert json.loads(str(stored["json/format_version"])) == version
    assert OLD_NAMES[version] in stored  # a real file of that version
    expected = EXPECTED[version][name]
    with minitrans.using("numpy", dtype="float32"):
        model, _ = experiment.load_trained(path)
        inputs = [np.array(expected[key]) for key in ("src", "tgt_in", "ids") if key in expected]
        logits = minitrans.to_numpy(model.forward(*inputs))
    want = np.array(expected["logits"], dtype=np.float32).reshape(expected["shape"])
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)


def test_a_loaded_old_checkpoint_has_the_current_names_and_version():
    for version in (1, 2):
        arrays, records = load_checkpoint(DATA / f"v{version}_copy.npz")
        assert records["format_version"] == checkpoint.FORMAT_VERSION
        assert {"param/output_projection.W", "optim/m/output_projection.b",
                "optim/v/decoder.layers.0.cross_attn.W_Q.W"} <= set(arrays)
        assert not any("generator" in key or "sublayer" in key for key in arrays)


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_checkpoint_without_conversion_would_not_load(version):
    """The conversion is what makes it load: the old names alone are refused."""
    path = DATA / f"v{version}_copy.npz"
    arrays = {key: value for key, value in _stored(path).items() if key.startswith("param/")}
    with minitrans.using("numpy", dtype="float32"):
        model, _ = experiment.load_trained(path)
        with pytest.raises(CheckpointError, match="missing parameters"):
            load_parameters(model, arrays, path)


def test_a_version_1_checkpoint_needs_both_renaming_steps():
    """Taken only to version 2, a version-1 file still lacks the output
    projection, and nothing else."""
    path = DATA / "v1_copy.npz"
    arrays = {checkpoint.rename_v1_to_v2(key): value for key, value in _stored(path).items()
              if key.startswith("param/")}
    with minitrans.using("numpy", dtype="float32"):
        model, _ = experiment.load_trained(path)
        with pytest.raises(CheckpointError) as info:
            load_parameters(model, arrays, path)
    missing = str(info.value).split("missing parameters: ")[1]
    assert missing == "param/output_projection.W, param/output_projection.b"


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_checkpoint_resumes_as_before(tmp_path, version):
    """Parameters and Adam's moments are renamed: the next step's loss is the
    one the old code computed after resuming."""
    path = tmp_path / f"v{version}_copy.npz"
    path.write_bytes((DATA / f"v{version}_copy.npz").read_bytes())
    with minitrans.using("numpy", dtype="float32"):
        trainer = experiment.resume_trainer(path, steps=3, progress=False, log=lambda m: None)
        assert trainer.step == 2 and trainer.optimizer.step_count == 2
        loss, tokens = trainer.train_step()
    assert tokens == 44
    assert loss == pytest.approx(EXPECTED[version]["copy"]["resumed_step_3_loss"], rel=1e-5)


@pytest.mark.parametrize("version", [1, 2])
def test_the_cli_translates_with_an_old_checkpoint(version):
    expected = EXPECTED[version]["copy"]["translate"]
    for options, key in (([], "greedy"), (["--beam", "3"], "beam_3")):
        result = subprocess.run(
            [sys.executable, "-m", "minitrans", "translate", "--checkpoint",
             str(DATA / f"v{version}_copy.npz"), *options],
            input="\n".join(expected["sentences"]) + "\n", capture_output=True, text=True,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == expected[key]


def test_an_array_under_both_its_old_and_its_new_name_is_refused(tmp_path):
    """Renaming would keep only one of the two: the file is refused instead."""
    entries = _stored(DATA / "v2_copy.npz")
    entries["param/output_projection.W"] = entries["param/generator.W"] + 1
    path = tmp_path / "both.npz"
    np.savez(path, **entries)
    _refused(load_checkpoint, path, "format version 2", "'param/output_projection.W'")


def test_a_newer_format_version_is_refused_in_one_line(tmp_path):
    entries = _stored(DATA / "v2_copy.npz")
    entries["json/format_version"] = np.array(json.dumps(4))
    path = tmp_path / "future.npz"
    np.savez(path, **entries)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in ("future.npz", "format version 4", "up to 3", "upgrade minitrans"):
        assert fragment in message, message


# ------------------------------------------------------------ untrusted input
#
# A checkpoint is a file someone may hand you. Each test below is a way a
# naive loader is led into a MemoryError, a hang, a traceback or a
# silently different model; each is now a CheckpointError naming the file.


def _trained(tmp_path):
    """A real checkpoint of a trainer after one step, and its entries."""
    config = TrainConfig(task="copy", steps=1, batch_size=4, warmup=1, eval_every=1,
                         eval_pairs=2, out_dir=str(tmp_path / "run"))
    sizes = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.0}
    with minitrans.using("numpy", dtype="float32"):
        trainer = experiment.new_trainer(config, sizes, progress=False, log=lambda m: None)
        trainer.train_step()
        trainer.save(trainer.checkpoint_path)
    with np.load(trainer.checkpoint_path) as stored:
        return {key: stored[key] for key in stored.files}


def _spoilt(tmp_path, name, change=None, **records):
    """A real checkpoint, its records replaced by ``records`` (JSON values),
    then ``change(entries)``."""
    entries = _trained(tmp_path)
    for key, value in records.items():
        entries[f"json/{key}"] = np.array(json.dumps(value))
    if change is not None:
        change(entries)
    path = tmp_path / name
    np.savez(path, **entries)
    return path


def _config(tmp_path, **changes):
    entries = _trained(tmp_path)
    return {**json.loads(str(entries["json/model_config"])), **changes}


def _refused(load, path, *fragments):
    with pytest.raises(CheckpointError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message and path.name in message, message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("field, value, fragment", [
    ("vocab_size", 10**9, "model_config.vocab_size"),
    ("vocab_size", 2**20, "describes a model of"),
    ("max_len", 10**9, "model_config.max_len"),
    ("d_model", 2**21, "model_config.d_model"),
    ("N", 100000, "model_config.N"),
    ("N", 1000, "describes a model of"),  # within the limit, but not what the file holds
    ("tie_embeddings", "false", "model_config.tie_embeddings: expected True or False"),
    ("h", 2.0, "model_config.h"),
])
def test_a_config_out_of_bounds_or_of_the_wrong_type_is_refused_before_building(
        tmp_path, field, value, fragment):
    path = _spoilt(tmp_path, "odd.npz", model_config=_config(tmp_path, **{field: value}))
    _refused(experiment.load_trained, path, fragment)


def test_a_hundred_thousand_layers_are_refused_at_once(tmp_path):
    """N = 100000 once built the layers for minutes before any check."""
    path = _spoilt(tmp_path, "deep.npz", model_config=_config(tmp_path, N=100000))
    code = ("import sys; from minitrans.training import experiment\n"
            "try: experiment.load_trained(sys.argv[1])\n"
            "except experiment.checkpoint.CheckpointError: print('refused')")
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == "refused", result.stderr


@pytest.mark.parametrize("history, fragment", [
    ({"step": [1], "lr": [0.1], "grad_norm": [1.0]}, "history: expected the fields"),
    ({"step": [1], "loss": [], "lr": [0.1], "grad_norm": [1.0]}, "lists of one length"),
    ({"step": [1], "loss": ["2.0"], "lr": [0.1], "grad_norm": [1.0]}, "history.loss[0]"),
    ({"step": [True], "loss": [2.0], "lr": [0.1], "grad_norm": [1.0]}, "history.step[0]"),
    ([1, 2], "history: expected a JSON object"),
])
def test_a_malformed_history_is_refused_on_resume(tmp_path, history, fragment):
    path = _spoilt(tmp_path, "history.npz", history=history)
    _refused(lambda p: experiment.resume_trainer(p, steps=3, progress=False), path, fragment)


@pytest.mark.parametrize("records, fragment", [
    ({"evaluations": [{"step": 1}]}, "evaluations[0]: expected the fields"),
    ({"evaluations": [{"step": 1, "pairs": 2, "loss": "low", "token_accuracy": 0.5,
                       "exact_match": 0.0}]}, "evaluations[0].loss"),
    ({"step": -1}, "step: expected"),
    ({"optimizer_step": "1"}, "optimizer_step: expected"),
    ({"task": {"name": "copy", "kind": "seq2seq", "level": "bytes"}}, "task.level"),
    ({"vocab": "{\"specials\": [], \"tokens\": []}"}, "vocab.specials"),
    ({"train_config": {"steps": "10"}}, "train_config.steps"),
    ({"train_config": {"shuffle": True}}, "train_config: unknown fields ['shuffle']"),
    ({"surprise": 1}, "records ['surprise']"),
])
def test_every_record_is_checked_field_by_field(tmp_path, records, fragment):
    path = _spoilt(tmp_path, "records.npz", **records)
    _refused(lambda p: experiment.resume_trainer(p, steps=3, progress=False), path, fragment)


def _zip_entries(path, entries, compression=zipfile.ZIP_STORED):
    """An .npz written entry by entry (np.savez cannot repeat a name)."""
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression) as archive:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicated name
        for name, value in entries:
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
    return path


def test_a_duplicated_entry_is_refused_not_silently_taken(tmp_path):
    entries = list(_trained(tmp_path).items())
    name, value = next((k, v) for k, v in entries if k == "param/output_projection.W")
    path = _zip_entries(tmp_path / "twice.npz", entries + [(name, np.zeros_like(value))])
    _refused(load_checkpoint, path, "'param/output_projection.W.npy' appears twice")


def test_an_unknown_member_is_refused(tmp_path):
    path = _spoilt(tmp_path, "extra.npz", lambda e: e.update(notes=np.ones(3)))
    _refused(load_checkpoint, path, "'notes.npy' is not a checkpoint entry")
    path = _spoilt(tmp_path, "extra-param.npz", lambda e: e.update({"param/spare": np.ones(3)}))
    _refused(experiment.load_trained, path, "parameters of no parameter", "param/spare")


def test_compression_is_refused_also_a_method_zipfile_cannot_read(tmp_path):
    entries = list(_trained(tmp_path).items())
    path = _zip_entries(tmp_path / "lzma.npz", entries, zipfile.ZIP_LZMA)
    _refused(load_checkpoint, path, "compression method 14")
    data = bytearray(_zip_entries(tmp_path / "plain.npz", entries).read_bytes())
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # the method fields
        start = data.find(signature)
        while start >= 0:
            data[start + offset:start + offset + 2] = (99).to_bytes(2, "little")
            start = data.find(signature, start + 4)
    path = tmp_path / "method99.npz"
    path.write_bytes(bytes(data))
    _refused(load_checkpoint, path, "compression method 99")


def test_a_huge_shape_in_an_array_header_is_refused_before_allocating(tmp_path):
    """output_projection.b's header declares 10**12 numbers over its own 16."""
    entries = [(k, v) for k, v in _trained(tmp_path).items() if k != "param/output_projection.b"]
    path = _zip_entries(tmp_path / "huge.npz", entries)
    with zipfile.ZipFile(path, "a") as archive:
        with archive.open("param/output_projection.b.npy", "w") as member:
            header = {"descr": "<f4", "fortran_order": False, "shape": (10**12,)}
            np.lib.format.write_array_header_1_0(member, header)
            member.write(bytes(64))
    _refused(load_checkpoint, path, "declares shape (1000000000000,)")


def test_a_small_file_cannot_drive_memory_up(tmp_path):
    """A member of 512 MB of zeros deflates to half a megabyte; the old loader
    unpacked it. Loading must stay far below the declared size."""
    path = tmp_path / "bomb.npz"
    entries = _trained(tmp_path)
    _zip_entries(path, entries.items())
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("param/spare.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f4", "fortran_order": False, "shape": (2**27,)})
            chunk = bytes(2**22)
            for _ in range(2**29 // len(chunk)):
                member.write(chunk)
    assert path.stat().st_size < 2**21
    code = ("import resource, sys\nfrom minitrans.training.run_files import checkpoint\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try: checkpoint.load_checkpoint(sys.argv[1])\n"
            "except checkpoint.CheckpointError as error: print(error, file=sys.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)")
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                            text=True, timeout=120)
    assert "compression method 8" in result.stderr, result.stderr
    assert int(result.stdout) < 64 * 1024, f"peak memory grew by {result.stdout} kB"


def test_deep_or_huge_json_is_refused_with_the_project_s_error(tmp_path, monkeypatch):
    deep = _spoilt(tmp_path, "deep.npz", lambda e: e.update({"json/step": np.array("[" * 10**5)}))
    _refused(load_checkpoint, deep, "'step' nests deeper than")
    shallow = _spoilt(tmp_path, "nine.npz", lambda e: e.update(
        {"json/step": np.array("[" * 9 + "]" * 9)}))
    _refused(load_checkpoint, shallow, "'step' nests deeper than 8")
    monkeypatch.setattr(rules, "MAX_RECORD_CHARS", 1000)  # the household's bound on JSON
    huge = _spoilt(tmp_path, "huge.npz", lambda e: e.update({"json/step": np.array(" " * 2000)}))
    _refused(load_checkpoint, huge, "json/step.npy", "at most 1000 characters")


def test_nan_in_a_record_is_refused(tmp_path):
    path = _spoilt(tmp_path, "nan.npz", lambda e: e.update({"json/step": np.array("NaN")}))
    _refused(load_checkpoint, path, "'step' is not valid JSON")


def test_parameter_count_is_the_built_model_s(backend_name):
    for options in ({}, {"tie_embeddings": True}, {"decoder_only": True}, {"pre_norm": True},
                    {"src_vocab_size": 9}, {"decoder_only": True, "pre_norm": True},
                    {"positions": "learned", "d_k": 3, "activation": "gelu"},
                    {"decoder_only": True, "positions": "learned", "tie_embeddings": True}):
        config = ModelConfig.preset("tiny", vocab_size=7, N=2, **options)
        model = experiment.build_model(config)
        assert config.parameter_count() == sum(v.size for _, v, _ in model.named_parameters())
