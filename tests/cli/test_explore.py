"""Exploring a trained model: ``minitrans generate``, ``minitrans attention``
and the attention maps behind them, on tiny checkpoints of both kinds."""

import io
import sys

import numpy as np
import pytest

import minitrans
from minitrans.training import attention_maps, experiment
from minitrans.training.optimisation import evaluation
from minitrans.training.run_files import plots
from minitrans.training.trainer import TrainConfig
from minitrans.cli.main import main

TINY = {"d_model": 16, "h": 2, "N": 2, "d_ff": 32, "dropout": 0.0}


def tiny_trainer(task, folder):
    config = TrainConfig(
        task=task, steps=2, batch_size=8, warmup=1, eval_every=2, eval_pairs=4, out_dir=str(folder)
    )
    return experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{"lm": path, "copy": path}: tiny models after two training steps."""
    paths = {}
    with minitrans.using("numpy", dtype="float32"):
        for task in ("lm", "copy"):
            trainer = tiny_trainer(task, tmp_path_factory.mktemp(task))
            for _ in range(2):
                trainer.train_step()
            trainer.save(trainer.checkpoint_path)
            paths[task] = trainer.checkpoint_path
    return paths


def command(capsys, *args):
    """(exit status, stdout lines, stderr lines) of ``minitrans *args``, in process."""
    status = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


# ---------------------------------------------------------------- generate


def test_generate_prints_prompt_and_continuation_and_repeats_for_a_seed(checkpoints, capsys):
    args = [
        "generate",
        "--checkpoint",
        checkpoints["lm"],
        "12+",
        "--temperature",
        "0.8",
        "--top-k",
        "5",
        "--top-p",
        "0.9",
        "--samples",
        "5",
        "--max-tokens",
        "4",
    ]
    status, first, err = command(capsys, *args, "--seed", "7")
    assert status == 0 and err == []
    assert len(first) == 5 and all(line.startswith("12+") for line in first)
    assert all(len(line) <= len("12+") + 4 for line in first)  # char level: 4 new tokens at most
    assert command(capsys, *args, "--seed", "7")[1] == first


def test_generate_draws_different_samples_from_a_flat_distribution(checkpoints, capsys):
    status, lines, _ = command(
        capsys,
        "generate",
        "--checkpoint",
        checkpoints["lm"],
        "1",
        "--temperature",
        "50",
        "--samples",
        "8",
        "--max-tokens",
        "6",
    )
    assert status == 0 and len(set(lines)) > 1


def test_generate_reports_invalid_utf8_on_standard_input(checkpoints, capsys, monkeypatch):
    """generate read standard input as text, so a byte that is not UTF-8 became
    a replacement character and then <unk>, without a word (translate reported it)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"1+\n2\xe9+\n")))
    status, _, err = command(capsys, "generate", "--checkpoint", checkpoints["lm"])
    assert status == 1 and len(err) == 1
    assert "standard input, line 2" in err[0] and "invalid UTF-8" in err[0] and "0xe9" in err[0]


def test_generate_reads_a_prompt_per_line_of_standard_input(checkpoints, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"1+\n23+4\n")))
    status, lines, _ = command(
        capsys, "generate", "--checkpoint", checkpoints["lm"], "--samples", "2", "--max-tokens", "3"
    )
    assert status == 0 and len(lines) == 4
    assert lines[0].startswith("1+") and lines[1].startswith("1+")
    assert lines[2].startswith("23+4") and lines[3].startswith("23+4")


def test_generate_and_translate_each_name_the_other_for_the_wrong_model(checkpoints, capsys):
    """translate given a language model used to print the greedy continuation
    of the "sentence" as if it were a translation, and there was no generate;
    now each command names the other for the wrong kind of model."""
    status, out, err = command(capsys, "generate", "--checkpoint", checkpoints["copy"], "12")
    assert status == 1 and out == [] and len(err) == 1
    assert "encoder-decoder" in err[0] and "minitrans translate" in err[0]
    status, out, err = command(capsys, "translate", "--checkpoint", checkpoints["lm"], "12+")
    assert status == 1 and out == [] and len(err) == 1
    assert "decoder-only" in err[0] and "minitrans generate" in err[0]


def test_generate_refuses_more_tokens_than_the_model_has_positions(checkpoints, capsys):
    status, _, err = command(
        capsys, "generate", "--checkpoint", checkpoints["lm"], "12+", "--max-tokens", "1000"
    )
    assert status == 1 and len(err) == 1 and "--max-tokens" in err[0] and "1000" in err[0]


# --------------------------------------------------------- attention maps


def test_attention_for_a_language_model(checkpoints):
    """The old attention_for sent the prompt to DecoderOnlyLM.start, which
    takes a batch size, and crashed inside KVCache (an array as a shape)."""
    model, task = experiment.load_trained(checkpoints["lm"])
    keys, queries, weights = attention_maps.attention_for(model, task, "12+34=")
    assert keys[:7] == ["<bos>", "1", "2", "+", "3", "4", "="]
    assert queries[:6] == ["1", "2", "+", "3", "4", "="]
    assert weights.shape == (2, len(queries), len(keys)) and len(keys) == len(queries)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(weights, k=1) == 0.0)  # causal: no position sees a later one


def test_every_panel_of_an_encoder_decoder(checkpoints):
    model, task = experiment.load_trained(checkpoints["copy"])
    panels, output = attention_maps.decode_and_attend(model, task, "0123")
    assert set(panels) == {"encoder", "decoder", "cross"}
    length = len(output)
    assert panels["encoder"].weights.shape == (2, 2, 4, 4)
    assert panels["decoder"].weights.shape == (2, 2, length, length)
    assert panels["cross"].weights.shape == (2, 2, length, 4)
    assert panels["decoder"].keys == ["<bos>"] + output[:-1] and panels["cross"].queries == output
    for panel in panels.values():
        np.testing.assert_allclose(panel.weights.sum(axis=-1), 1.0, rtol=1e-5)
    # the cross-attention of the last decoder layer is what attention_for returned before
    keys, queries, weights = attention_maps.attention_for(model, task, "0123")
    assert keys == list("0123") and queries == output
    np.testing.assert_array_equal(weights, panels["cross"].weights[-1])


def test_attention_command_writes_a_file_per_kind(checkpoints, capsys, tmp_path):
    status, out, _ = command(
        capsys,
        "attention",
        "--checkpoint",
        checkpoints["copy"],
        "0123",
        "--out",
        tmp_path / "attn.png",
    )
    assert status == 0 and out[0].startswith("translation: ")
    names = {"attn-encoder.png", "attn-decoder.png", "attn-cross.png"}
    assert {p.name for p in tmp_path.iterdir()} == names
    status, out, _ = command(
        capsys,
        "attention",
        "--checkpoint",
        checkpoints["lm"],
        "12+",
        "--out",
        tmp_path / "lm.png",
        "--layer",
        "1",
    )
    assert status == 0 and out[0].startswith("continuation: ")
    assert (tmp_path / "lm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_command_refuses_a_missing_folder_and_a_layer_too_deep(
    checkpoints, capsys, tmp_path
):
    status, _, err = command(
        capsys,
        "attention",
        "--checkpoint",
        checkpoints["lm"],
        "12+",
        "--out",
        tmp_path / "nowhere" / "attn.png",
    )
    assert status == 1 and len(err) == 1 and str(tmp_path / "nowhere") in err[0]
    assert not (tmp_path / "nowhere").exists()
    status, _, err = command(
        capsys,
        "attention",
        "--checkpoint",
        checkpoints["lm"],
        "12+",
        "--out",
        tmp_path / "a.png",
        "--layer",
        "2",
    )
    assert status == 1 and "--layer" in err[0] and "[0, 1]" in err[0]


# ------------------------------------------------ comparable losses of an lm


def test_the_held_out_objective_is_the_training_loss_on_held_out_pairs(tmp_path):
    """The held-out loss (no smoothing, answer tokens) was the only held-out
    curve, plotted against a training loss smoothed over every token: for an
    lm they measure different things. The objective is the training loss
    itself, computed on held-out pairs."""
    trainer = tiny_trainer("lm", tmp_path)
    pairs = trainer.task.valid[:6]
    metrics = evaluation.teacher_forced_metrics(
        trainer.model, trainer.task, pairs, label_smoothing=0.1
    )
    batch = trainer.task.make_batch(pairs)
    with evaluation.evaluating(trainer.model):
        logits = trainer.model.forward(*evaluation.model_inputs(batch))
    assert metrics["objective"] == pytest.approx(
        float(trainer.loss_fn.forward(logits, batch.tgt_out))
    )
    assert metrics["objective"] != pytest.approx(metrics["loss"])
    copy = tiny_trainer("copy", tmp_path / "copy")
    plain = evaluation.teacher_forced_metrics(copy.model, copy.task, copy.task.valid[:6])
    assert plain["objective"] == pytest.approx(plain["loss"])  # no smoothing, the same tokens


def test_the_loss_plot_draws_old_evaluations_without_the_objective(tmp_path):
    history = {"step": [1, 2], "loss": [3.0, 2.5]}
    evaluations = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5, "objective": 2.4}]
    plots.save_losses(tmp_path / "loss.png", history, evaluations, "lm", 0.1, True)
    assert (tmp_path / "loss.png").stat().st_size > 0
