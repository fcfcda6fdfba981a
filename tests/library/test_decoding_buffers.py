"""Decoding without waste, counted token by token on the strict backend.

On a GPU a decoded token costs what it launches and allocates, not its
arithmetic. So the arrays a token needs from one step to the next (the
tokens written so far, the ban on <pad>, the causal mask, beam search's
history and reordered caches) are made once per decode and filled in place.
These tests watch every array the strict backend hands out between two
calls of the model and check that

* no token builds a buffer (no zeros, empty, full, arange, tril,
  concatenate, stack...): nothing is rebuilt, nothing grows by copying;
* token 50 allocates as many arrays as token 5: the cost does not grow with
  the sentence, beyond attention reading more cached keys;
* a token waits for the GPU once: has every row finished?
"""

import inspect

import numpy as np
import pytest

import minitrans
from minitrans import decoding
from minitrans.core import backend, checks, host_syncs, kernels, strict
from minitrans.model.config import ModelConfig
from minitrans.model.kvcache import KVCache
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer

EOS = 2
STEPS = 60  # tokens decoded; tokens 5 and 50 are compared
BUILDERS = ("zeros", "empty", "ones", "full", "arange", "tril", "triu", "concatenate", "stack",
            "zeros_like", "empty_like", "ones_like", "full_like", "eye")


def _kernel_code():
    """The code of every kernel (``kernels.PAIRS``): what a kernel builds
    inside (the ones of a sum written as a product, a rotation's matrix) is
    the kernel's own business, not decoding's, and is not counted here."""
    versions = [getattr(kernel, kind, None) for kernel in kernels.PAIRS.values()
                for kind in ("reference", "fast", "device")]
    return {version.__code__ for version in versions if hasattr(version, "__code__")}


@pytest.fixture
def strict_xp():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


def _model(decoder_only=False, options=None):
    """A tiny random model that never says <eos>: every token is decoded."""
    config = ModelConfig.preset("tiny", vocab_size=7, N=2, decoder_only=decoder_only,
                                dropout=0.0, **(options or {}))
    model = (DecoderOnlyLM if decoder_only else Transformer)(config, rng=0)
    model.output_projection.params["b"][EOS] -= 1e4
    return model.eval()


class TokenLedger:
    """What happens between two calls of the model, token by token: the
    arrays allocated (fresh ones, not views), the builders called by name,
    and the waits for the device."""

    def __init__(self, monkeypatch, model, call_names):
        self.tokens = []  # per token: {"arrays": n, "builders": [...], "syncs": n}
        self.states = []
        make, record = strict.StrictArray.__init__, host_syncs.record

        def counting_make(array, data):  # every device array the backend hands out
            if self.tokens and getattr(data, "base", None) is None:  # fresh, not a view
                self.tokens[-1]["arrays"] += 1
            make(array, data)

        def counting_record(kind):
            if self.tokens:
                self.tokens[-1]["syncs"] += 1
            return record(kind)

        monkeypatch.setattr(strict.StrictArray, "__init__", counting_make)
        monkeypatch.setattr(host_syncs, "record", counting_record)
        for name in BUILDERS:
            monkeypatch.setattr(strict.namespace, name, self._builder(name))
        for name in call_names:
            monkeypatch.setattr(model, name, self._marking(getattr(model, name)))
        start = model.start

        def keeping_start(*args):  # the decoding states the model hands out
            self.states.append(start(*args))
            return self.states[-1]

        monkeypatch.setattr(model, "start", keeping_start)

    def _builder(self, name):
        wrapped, kernel_code = getattr(strict.namespace, name), _kernel_code()

        def build(*args, **kwargs):
            caller = inspect.currentframe().f_back.f_code
            if self.tokens and caller not in kernel_code:
                self.tokens[-1]["builders"].append(f"{name} ({caller.co_name})")
            return wrapped(*args, **kwargs)

        return build

    def _marking(self, call):
        def marked(*args):
            self.tokens.append({"arrays": 0, "builders": [], "syncs": 0})
            return call(*args)

        return marked

    def between_calls(self):
        """Every token but the last (whose tail runs after the last call)."""
        return self.tokens[:-1]


def _decode(ledger_of, path):
    """Decode STEPS tokens along ``path`` with a ledger on the model's calls."""
    if path.startswith("generate"):
        lm = _model(decoder_only=True)
        ledger = ledger_of(lm, ["step"])
        prompt = minitrans.to_device(np.array([[1, 5, 6], [1, 3, 4]]))
        strategy = path.split("-")[1]
        tokens = decoding.generate(lm, prompt, STEPS, strategy=strategy, rng=0)
        return ledger, tokens, 2  # the prompt's first two tokens are fed before the loop
    model = _model(options={"positions": "rope"} if path == "greedy-rope" else None)
    src = minitrans.to_device(np.array([[3, 4, 5, 0], [6, 4, 0, 0], [5, 5, 6, 3]]))
    if path == "recompute":
        ledger = ledger_of(model, ["prefix_logits"])
        tokens = decoding.greedy(model, src, STEPS, use_cache=False, workers=1)
    elif path == "beam":
        ledger = ledger_of(model, ["step"])
        tokens = decoding.beam_search(model, src, beam_size=3, max_len=STEPS, workers=1)
    elif path == "sample":
        ledger = ledger_of(model, ["step"])
        tokens = decoding.sample(model, src, STEPS, rng=0)
    else:
        ledger = ledger_of(model, ["step"])
        tokens = decoding.greedy(model, src, STEPS, workers=1)
    return ledger, tokens, 0


@pytest.fixture
def ledger_of(strict_xp, monkeypatch):
    return lambda model, call_names: TokenLedger(monkeypatch, model, call_names)


CACHED = ["greedy", "greedy-rope", "sample", "beam", "generate-greedy", "generate-sample"]


def _cached_tokens(ledger, prompt_steps):
    """The ledger's decoded tokens after the first, which makes the buffers."""
    per_token = ledger.between_calls()[prompt_steps + 1:]
    assert len(per_token) == STEPS - 2
    return per_token


@pytest.mark.parametrize("path", CACHED)
def test_a_cached_token_builds_nothing_and_costs_the_same_at_5_and_50(ledger_of, path):
    ledger, tokens, prompt_steps = _decode(ledger_of, path)
    assert tokens.shape[1] == STEPS  # no early stop: every token decoded
    per_token = _cached_tokens(ledger, prompt_steps)
    built = {name for token in per_token for name in token["builders"]}
    assert not built, f"a decoded token called {sorted(built)}"
    assert per_token[5]["arrays"] == per_token[50]["arrays"], (per_token[5], per_token[50])
    assert len({token["arrays"] for token in per_token}) == 1, per_token


def test_the_ledger_sees_work_that_grows_with_the_sentence(ledger_of, monkeypatch):
    """Planted: a cache that copies each cached position again at every
    step, in place (no builder): token 50 allocates more than token 5."""
    def keys_copied_position_by_position(cache):
        for position in range(cache.length):
            cache.K[:, :, position] = cache.K[:, :, position] * 1.0
        return cache.K[:, :, : cache.length]

    monkeypatch.setattr(KVCache, "keys", property(keys_copied_position_by_position))
    ledger, _, prompt_steps = _decode(ledger_of, "greedy")
    per_token = _cached_tokens(ledger, prompt_steps)
    assert per_token[50]["arrays"] - per_token[5]["arrays"] == 45 * 2  # per position, per layer


@pytest.mark.parametrize("path", CACHED + ["recompute"])
def test_a_token_waits_for_the_device_once(ledger_of, path):
    ledger, _, prompt_steps = _decode(ledger_of, path)
    syncs = [token["syncs"] for token in ledger.between_calls()[prompt_steps:]]
    assert syncs == [1] * (STEPS - 1)


def test_the_ledger_sees_a_check_of_every_token(ledger_of, monkeypatch):
    """Planted: the model checks the range of every token it is fed."""
    monkeypatch.setattr(checks, "_inside_checked_call", lambda: False)
    ledger, _, _ = _decode(ledger_of, "greedy")
    assert all(token["syncs"] > 1 for token in ledger.between_calls())


def test_recomputing_writes_each_token_into_one_prefix(ledger_of):
    """The recomputing path reruns the model on the whole prefix (its
    arrays grow with it), but never copies the prefix to append a token."""
    ledger, tokens, _ = _decode(ledger_of, "recompute")
    assert tokens.shape[1] == STEPS
    built = {name for token in ledger.between_calls()[1:] for name in token["builders"]}
    assert not [name for name in built if name.startswith(("concatenate", "stack"))], built


def test_beam_search_keeps_two_cache_buffers_and_one_memory(ledger_of, monkeypatch):
    """The caches follow the beams' parents by copying between two buffers
    per layer; the encoder's keys and values, the same for every beam of a
    source, are never gathered again."""
    model = _model()
    ledger = ledger_of(model, [])
    seen_K, seen_memory = [], []
    step = model.step

    def watching_step(state, tokens):
        seen_K.append(state.caches[0].K)  # kept alive: no id is reused
        seen_memory.append(state.memory_kvs[0][0])
        return step(state, tokens)

    monkeypatch.setattr(model, "step", watching_step)
    src = minitrans.to_device(np.array([[3, 4, 5, 0], [6, 4, 0, 0]]))
    decoding.beam_search(model, src, beam_size=3, max_len=20, workers=1)
    assert len(seen_K) == 20 and len(ledger.states) == 1
    assert len({id(K) for K in seen_K}) == 2  # the first reorder makes the pair
    assert len({id(memory) for memory in seen_memory}) == 1


@pytest.mark.parametrize("name", ["numpy", "strict"])
def test_kvcache_reorder_moves_the_filled_rows_into_its_spare_buffer(name):
    with minitrans.using(name, dtype="float32"):
        xp = backend.get_xp()
        cache = KVCache(batch=3, h=2, d_k=4, max_len=6, dtype="float32")
        K = xp.asarray(np.arange(3 * 2 * 4 * 4, dtype="float32").reshape(3, 2, 4, 4))
        cache.append(K[:, :, :2], -K[:, :, :2])
        cache.append(K[:, :, 2:], -K[:, :, 2:])
        buffers = []
        for index in ([2, 0, 0], [1, 2, 0], [0, 0, 1]):
            expected = minitrans.to_numpy(cache.keys)[index]
            cache.reorder(xp.asarray(np.array(index)))
            buffers.append(cache.K)
            np.testing.assert_array_equal(minitrans.to_numpy(cache.keys), expected)
            np.testing.assert_array_equal(minitrans.to_numpy(cache.values), -expected)
        assert buffers[0] is buffers[2] and buffers[0] is not buffers[1]
        assert cache.keys.shape == (3, 2, 4, 4) and cache.K.shape == (3, 2, 6, 4)
        cache.reorder(xp.asarray(np.array([0, 0, 1, 1, 2, 2])))  # a new batch size
        np.testing.assert_array_equal(minitrans.to_numpy(cache.keys)[::2],
                                      minitrans.to_numpy(buffers[2][:, :, :4]))
