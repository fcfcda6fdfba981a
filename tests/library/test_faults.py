"""Faults: killed while checkpointing, extreme values, determinism."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import minitrans
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.training import experiment
from minitrans.training.run_files.checkpoint import load_checkpoint
from minitrans.training.trainer import TrainConfig
from tests.conftest import warnings_as_errors

TINY = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.1}


def _trainer(out_dir, steps, **settings):
    values = dict(task="copy", steps=steps, batch_size=16, warmup=4, eval_every=1, eval_pairs=4,
                  target_exact_match=1.1, out_dir=str(out_dir))
    config = TrainConfig(**{**values, **settings})
    return experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)


def test_the_same_seed_gives_bit_identical_losses_over_50_steps(tmp_path):
    losses = []
    for run in ("a", "b"):
        trainer = _trainer(tmp_path / run, steps=50, eval_every=50)
        trainer.fit()
        losses.append(trainer.history["loss"])
    assert len(losses[0]) == 50 and losses[0] == losses[1]


TRAIN_FOREVER = textwrap.dedent("""
    import sys
    from minitrans.training import experiment
    from minitrans.training.trainer import TrainConfig
    config = TrainConfig(task="copy", steps=10_000, batch_size=16, warmup=4, eval_every=1,
                         eval_pairs=4, target_exact_match=1.1, out_dir=sys.argv[1])
    sizes = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.1}
    experiment.new_trainer(config, sizes, progress=False, log=lambda m: None).fit()
""")


def test_a_run_killed_while_checkpointing_always_leaves_a_loadable_checkpoint(tmp_path):
    """The trainer saves after every step; kill it at random moments, several
    times, each time resuming from what it left."""
    out = tmp_path / "run"
    path = out / "checkpoint.npz"
    chance = random.Random(0)
    steps_seen = []
    for _ in range(4):
        process = subprocess.Popen([sys.executable, "-c", TRAIN_FOREVER, str(out)])
        deadline = time.time() + 60
        while not path.exists() and time.time() < deadline:  # wait for the first checkpoint
            time.sleep(0.05)
        time.sleep(chance.uniform(0.0, 1.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
        _, records = load_checkpoint(path)  # never truncated, never half written
        steps_seen.append(records["step"])
    assert all(step >= 1 for step in steps_seen)
    resumed = experiment.resume_trainer(
        path, steps=steps_seen[-1] + 3, progress=False, log=lambda m: None
    )
    resumed.fit()
    assert resumed.step == steps_seen[-1] + 3
    # a killed writer may leave its temporary file behind; training removes it
    assert not [name for name in os.listdir(out) if name.startswith(".tmp-")]


def test_training_removes_the_temporary_files_of_an_interrupted_save(tmp_path):
    messages = []
    trainer = _trainer(tmp_path, steps=1)
    trainer.log = messages.append
    (tmp_path / ".tmp-killed.npz").write_bytes(b"half a checkpoint")
    (tmp_path / "notes.txt").write_text("kept")
    trainer.fit()
    assert sorted(os.listdir(tmp_path)) == ["best.npz", "checkpoint.npz", "notes.txt"]
    assert any(".tmp-killed.npz" in message for message in messages)


@pytest.mark.parametrize("decoder_only", [False, True])
def test_extreme_but_valid_inputs_stay_finite_without_warnings(backend_name, decoder_only):
    """Sequences of length 1, a batch of one, a vocabulary of 4 (the
    specials alone), and logits of +-1e4 in the loss."""
    config = ModelConfig(
        vocab_size=4, d_model=8, h=2, N=1, d_ff=16, max_len=8, decoder_only=decoder_only
    )
    model = DecoderOnlyLM(config, rng=0) if decoder_only else Transformer(config, rng=0)
    ids = minitrans.to_device(np.array([[3]]))
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=0)
    with warnings_as_errors():
        logits = model.forward(ids) if decoder_only else model.forward(ids, ids)
        loss = loss_fn.forward(logits, ids)
        model.backward(loss_fn.backward())
        huge = minitrans.from_host(np.array([[[1e4, -1e4, 0.0, 1e4]]]))
        extreme = loss_fn.forward(huge, ids)
        dlogits = loss_fn.backward()
    assert np.isfinite(float(loss)) and np.isfinite(float(extreme))
    assert np.isfinite(minitrans.to_numpy(dlogits)).all()
    assert all(np.isfinite(minitrans.to_numpy(g)).all() for _, _, g in model.named_parameters())
