"""The model sizes the speed benchmarks time, and how a run takes its turns.

The encoder-decoders (tiny, small, base, copy) are timed against their
mirror in torch.nn.Transformer (minitrans.interop.torch); the llama config,
a decoder-only language model with Llama's options, against transformers'
LlamaForCausalLM (``harness.llama_runner``). ``vs_pytorch.py`` times them
all, ``kernels.py`` times the kernels on their arrays.
"""

import importlib.util
import sys

CONFIGS = {  # name: model sizes, sequence length (source and target), batch
    "tiny": dict(d_model=64, h=4, N=2, d_ff=256, vocab_size=16, length=16, batch=64),
    "small": dict(d_model=128, h=4, N=2, d_ff=512, vocab_size=1000, length=32, batch=64),
    "base": dict(d_model=256, h=8, N=3, d_ff=1024, vocab_size=8000, length=64, batch=32),
    "copy": dict(d_model=512, h=8, N=2, d_ff=2048, vocab_size=11, length=10, batch=80),
}
# d_ff about 8/3 d_model (682.7, rounded up to a multiple of 16), 2 key/value
# heads for 8 query heads, as many tokens a step as base (16 x 128 = 32 x 64).
LLAMA_CONFIGS = {
    "llama": dict(model="llama", d_model=256, h=8, kv_heads=2, N=4, d_ff=688, vocab_size=8000,
                  length=128, batch=16, norm_eps=1e-5, rope_base=10000.0),
}
ALL_CONFIGS = {**CONFIGS, **LLAMA_CONFIGS}
# --quick checks a script, not the speed: its llama is smaller (the report's
# row gives the sizes it ran)
QUICK_SIZES = {"llama": dict(d_model=64, N=2, d_ff=176, vocab_size=1000, length=32, batch=8)}
STEPS_PER_TURN = {"tiny": 8, "small": 4, "base": 2, "copy": 2, "llama": 2}
WARMUP_STEPS = 3
PROFILE_STEPS = 4  # of the pass that times the matrix products: more steps, a steadier share
# OpenBLAS's threads keep running for about 0.1 s after a matrix product,
# waiting for the next one, and take CPU from whatever runs then: the other
# library's turn, if it came straight after. A run waits this long before
# every turn (not on a GPU).
PAUSE_SECONDS = 0.3


def thread_env(threads):
    """The variables that cap the BLAS and OpenMP threads of a process."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    return {name: str(threads) for name in names}


def config_sizes(name, quick=False):
    """The sizes a run of config ``name`` uses: QUICK_SIZES's with --quick."""
    return {**ALL_CONFIGS[name], **(QUICK_SIZES.get(name, {}) if quick else {})}


def unavailable(name):
    """Why config ``name`` cannot run here (its reference library is not
    installed), or None."""
    if name in LLAMA_CONFIGS and importlib.util.find_spec("transformers") is None:
        return ("transformers is not installed (the reference LlamaForCausalLM): "
                "pip install transformers")
    return None


def available_configs(names, skipped=None):
    """Those of ``names`` that can run here, in order; each of the others is
    named on standard error with the reason (``unavailable``), and the
    reason kept in ``skipped`` (a dict) where one is given."""
    kept = []
    for name in names:
        reason = unavailable(name)
        if reason:
            print(f"skipping {name}: {reason}", file=sys.stderr, flush=True)
            if skipped is not None:
                skipped[name] = reason
        else:
            kept.append(name)
    return kept
