"""What both libraries' workers of vs_pytorch.py are given: the same random
batches, the same Adam settings, the same sources to decode, and the
thread split of minitrans's step."""

import os
import resource

import numpy as np

BATCHES = 4  # distinct batches, used in turn
ADAM_SETTINGS = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)  # both libraries' Adam
DECODE_BATCH, DECODE_LENGTH = 32, 64
DEVICE_BACKENDS = {"cpu": "numpy", "gpu": "cupy"}  # minitrans's backend on each --device


def rss_bytes():
    """Resident memory of this process now."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def make_batches(sizes, seed=0):
    """Random ids without padding: (src, tgt_in, tgt_out) of (batch, length) each."""
    rng = np.random.default_rng(seed)
    shape = (sizes["batch"], sizes["length"])
    return [
        tuple(rng.integers(4, sizes["vocab_size"], size=shape) for _ in range(3))
        for _ in range(BATCHES)
    ]


def decode_sources(vocab_size, seed=1):
    """The (DECODE_BATCH, DECODE_LENGTH) source ids that every decoding run
    translates, the same in both workers."""
    return np.random.default_rng(seed).integers(4, vocab_size, size=(DECODE_BATCH, DECODE_LENGTH))


def model_config(sizes, max_len):
    """minitrans's ModelConfig of an encoder-decoder config's sizes."""
    from minitrans.model.config import ModelConfig

    return ModelConfig(
        vocab_size=sizes["vocab_size"],
        d_model=sizes["d_model"],
        h=sizes["h"],
        N=sizes["N"],
        d_ff=sizes["d_ff"],
        dropout=0.1,
        max_len=max_len,
    )


def minitrans_threads(device, threads, workers=None):
    """(workers, BLAS threads per worker) of minitrans's step: by default as
    many workers as ``threads`` on the CPU and one on a GPU, the threads
    shared out among them."""
    workers = (1 if device == "gpu" else threads) if workers is None else workers
    return workers, max(1, threads // workers)


def one_line(error):
    """An exception as one short line, for the report: its type and the
    first line of its message."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."
