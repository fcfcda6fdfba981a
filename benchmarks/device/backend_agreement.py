"""Do two backends train alike, and does the key/value cache decode as
recomputation does? Two checks of the device check (``check.py``), each also a command:

    python benchmarks/device/backend_agreement.py losses --backends numpy,cupy [--steps 20]
    python benchmarks/device/backend_agreement.py decode --backend cupy [--checkpoint best.npz]

``losses`` trains the copy task's model for ``--steps`` steps from the same
seed on each backend (one worker on both, so that every batch is split the
same way: not at all) and compares the two series of losses, step by step,
with a float32 tolerance. It runs twice: without dropout, the copy task's
setting, and with dropout 0.1, which agrees only where both backends draw
the same dropout masks.

``decode`` greedy-decodes the copy task's 1,000 held-out sources with the key/value
cache and by recomputing the whole prefix at every step, and checks that
both give the same tokens and close logits; it times each.

Each prints one line ``RESULT {json}`` at the end, for the device check.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

LOSS_RTOL = 1e-3  # per step, float32 on two devices: sums in another order
LOGIT_TOLERANCE = 1e-4  # the largest logit difference, relative to the largest logit
DROPOUTS = (0.0, 0.1)
RESULT_PREFIX = "RESULT "


@contextlib.contextmanager
def one_blas_thread():
    """The models here are small: one BLAS thread is as fast, and two on a
    busy two-core machine spin against each other (12 times slower, seen)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def training_losses(backend_name, steps=20, dropout=0.0, seed=0):
    """The training losses of the copy task's model, steps 1 .. ``steps``,
    float32, on ``backend_name``, one worker."""
    from minitrans.core import backend
    from minitrans.training import experiment

    with backend.using(backend_name, dtype="float32"), tempfile.TemporaryDirectory() as folder, \
            one_blas_thread():
        config = experiment.train_config_for("copy", steps=steps, workers=1, seed=seed,
                                             out_dir=folder)
        trainer = experiment.new_trainer(config, {"dropout": dropout}, log=lambda *_: None,
                                         progress=False)
        return [float(trainer.train_step()[0]) for _ in range(steps)]


def compare_series(reference, other, rtol=LOSS_RTOL):
    """How far ``other`` is from ``reference``, step by step: {"worst":
    the largest |other - reference| / |reference|, "worst_step": its step
    (from 1), "passed": every step within ``rtol``}."""
    reference, other = np.asarray(reference, float), np.asarray(other, float)
    if reference.shape != other.shape or reference.size == 0:
        return {"worst": float("inf"), "worst_step": None, "passed": False}
    differences = np.abs(other - reference) / np.maximum(np.abs(reference), 1e-30)
    differences = np.where(np.isnan(differences), np.inf, differences)  # a NaN never agrees
    worst = int(np.argmax(differences))
    return {"worst": float(differences[worst]), "worst_step": worst + 1,
            "passed": bool(np.all(differences <= rtol))}


def loss_agreement(first, second, steps=20, dropout=0.0, rtol=LOSS_RTOL):
    """The losses of ``steps`` steps on backends ``first`` and ``second``
    side by side, and how well they agree (``compare_series``)."""
    losses = {name: training_losses(name, steps, dropout) for name in (first, second)}
    return {"backends": [first, second], "dropout": dropout, "rtol": rtol, "losses": losses,
            **compare_series(losses[first], losses[second], rtol)}


def held_out_batch(pairs=1000):
    """The copy task's first ``pairs`` held-out pairs as a batch on the
    current backend."""
    from minitrans.data.tasks import load_task

    task = load_task("copy", seed=0)
    return task.make_batch(task.valid[:pairs])


def decoding_model(checkpoint=None):
    """The model of ``checkpoint`` (eval mode), or a fresh copy-task model of
    seed 0 where there is none; and which it is, in words."""
    from minitrans.data.tasks import load_task
    from minitrans.training import experiment

    if checkpoint and os.path.exists(checkpoint):
        return experiment.load_trained(checkpoint)[0], f"trained, from {checkpoint}"
    config = experiment.model_config_for(load_task("copy", seed=0))
    return experiment.build_model(config, seed=0).eval(), "fresh, seed 0 (no trained checkpoint)"


def timed_greedy(model, src, max_len, use_cache):
    """(tokens, logits) on the host and the seconds greedy decoding took."""
    from minitrans import decoding
    from minitrans.core import backend

    start = time.perf_counter()
    tokens, logits = decoding.greedy(model, src, max_len, use_cache=use_cache,
                                     return_logits=True)
    tokens, logits = backend.to_numpy(tokens), backend.to_numpy(logits)  # waits for the device
    return tokens, logits, time.perf_counter() - start


def decoding_agreement(backend_name, checkpoint=None, pairs=1000):
    """Greedy decoding with the key/value cache against recomputation on
    ``backend_name`` (float32): the same tokens, logits within
    LOGIT_TOLERANCE of the largest, the time of each, and the exact match
    with the held-out targets."""
    from minitrans.core import backend

    with backend.using(backend_name, dtype="float32"), one_blas_thread():
        model, which = decoding_model(checkpoint)
        batch = held_out_batch(pairs)
        max_len = batch.tgt_out.shape[1]
        # Each way runs once untimed, on the whole batch: CuPy writes a
        # reduction's block size, chosen from the sizes, into the kernel it
        # compiles, so a warm-up on 8 rows left seconds of compiling in the
        # timed run (on an H200, 8.8 s for the cache's first 1000 rows).
        for use_cache in (True, False):
            timed_greedy(model, batch.src, max_len, use_cache)
        cached, cached_logits, cached_seconds = timed_greedy(model, batch.src, max_len, True)
        slow, slow_logits, slow_seconds = timed_greedy(model, batch.src, max_len, False)
        targets = backend.to_numpy(batch.tgt_out)
    same_tokens = cached.shape == slow.shape and bool((cached == slow).all())
    logit_error = (float(np.abs(cached_logits - slow_logits).max() / np.abs(slow_logits).max())
                   if cached_logits.shape == slow_logits.shape else float("inf"))
    return {"backend": backend_name, "model": which, "pairs": int(len(targets)),
            "same_tokens": same_tokens, "logit_error": logit_error,
            "cached_seconds": cached_seconds, "recomputed_seconds": slow_seconds,
            "exact_match": exact_match(cached, targets),
            "passed": same_tokens and logit_error <= LOGIT_TOLERANCE}


def exact_match(tokens, targets, pad_id=0):
    """The share of rows of ``tokens`` equal to ``targets`` (both (B, L) ids,
    padded with ``pad_id``; their widths may differ)."""
    width = max(tokens.shape[1], targets.shape[1])
    tokens, targets = (np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=pad_id)
                       for a in (tokens, targets))
    return float((tokens == targets).all(axis=1).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="check", required=True)
    losses = commands.add_parser("losses", help="the losses of two backends, step by step")
    losses.add_argument("--backends", default="numpy,cupy", help="two, comma-separated")
    losses.add_argument("--steps", type=int, default=20)
    decode = commands.add_parser("decode", help="cached against recomputed greedy decoding")
    decode.add_argument("--backend", default="cupy")
    decode.add_argument("--checkpoint", help="a trained copy-task checkpoint (default: fresh)")
    args = parser.parse_args(argv)
    if args.check == "losses":
        names = args.backends.split(",")
        if len(names) != 2:
            parser.error(f"--backends: expected two names, got {args.backends!r}")
        result = {"runs": [loss_agreement(*names, args.steps, dropout) for dropout in DROPOUTS]}
        result["passed"] = all(run["passed"] for run in result["runs"])
    else:
        result = decoding_agreement(args.backend, args.checkpoint)
    print(RESULT_PREFIX + json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
