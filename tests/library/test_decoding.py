"""Decoding: greedy, beam search and sampling, with and without the KV cache.

The models are random and tiny (vocabulary of 7: <pad>=0, <bos>=1, <eos>=2
and four words). A random model says <eos> almost at once, so most tests
lower the <eos> bias of the output layer a little to get sentences of a
few tokens, some ending before others.
"""

import types

import numpy as np
import pytest

import minitrans
from minitrans import decoding
from minitrans.core import backend
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.model.transformer import Transformer
from minitrans.ops.softmax import softmax
from tests.library.conftest import assert_names

PAD, BOS, EOS = 0, 1, 2
SOURCES = [[3, 4, 5, 0], [6, 4, 0, 0], [5, 5, 6, 3]]
PROMPTS = [[1, 3, 4], [1, 5, 6]]

# (options, seed, how much to lower the <eos> bias): variants whose greedy
# sentences have different lengths, so that padding and early stop show.
ENCODER_DECODERS = [
    pytest.param({}, 0, 1.0, id="post-norm"),
    pytest.param({"pre_norm": True, "tie_embeddings": True}, 2, 0.0, id="pre-norm-tied"),
]


def make_model(options=None, seed=0, eos_shift=1.0, decoder_only=False, dropout=0.0):
    config = ModelConfig.preset(
        "tiny", vocab_size=7, N=2, decoder_only=decoder_only, dropout=dropout, **(options or {})
    )
    model = (DecoderOnlyLM if decoder_only else Transformer)(config, rng=seed)
    model.output_projection.params["b"][EOS] -= eos_shift
    return model.eval()


def host(x):
    return minitrans.to_numpy(x)


def sequence_log_probs(model, src, tokens):
    """log P(tokens | src) of each row, summed up to and including its <eos>,
    from the slow path: prefix_logits on the whole prefix at every step.
    Returns (log-probabilities (B,), lengths (B,)) on the host."""
    xp = backend.get_xp()
    tokens_host = host(tokens)
    B, L = tokens_host.shape
    total, lengths = np.zeros(B), (tokens_host != PAD).sum(axis=1)
    prefix = xp.full((B, 1), BOS, dtype=tokens.dtype)
    for t in range(L):
        logits = host(model.prefix_logits(src, prefix)).astype(np.float64)
        log_probs = logits - logits.max(axis=1, keepdims=True)
        log_probs -= np.log(np.exp(log_probs).sum(axis=1, keepdims=True))
        alive = t < lengths
        total[alive] += log_probs[alive, tokens_host[alive, t]]
        prefix = xp.concatenate(
            [prefix, xp.where(tokens[:, t : t + 1] == PAD, EOS, tokens[:, t : t + 1])], axis=1
        )
    return total, lengths


def assert_decoded_format(tokens, max_len):
    """Each row: words, then <eos>, then only <pad>; no <pad> before <eos>."""
    rows = host(tokens)
    assert rows.ndim == 2 and 1 <= rows.shape[1] <= max_len
    for row in rows:
        ends = np.flatnonzero(row == EOS)
        stop = ends[0] + 1 if ends.size else len(row)
        assert (row[:stop] != PAD).all() and (row[stop:] == PAD).all(), row
    finished_last = (rows == EOS).any(axis=1)
    if rows.shape[1] < max_len:  # stopped early: only because every row finished
        assert finished_last.all() and (rows[:, -1] != PAD).any()


# ------------------------------------------------------------------ greedy


@pytest.mark.parametrize("options, seed, shift", ENCODER_DECODERS)
def test_cached_and_recomputed_greedy_give_the_same_tokens_and_logits(
    float64, device, options, seed, shift
):
    model = make_model(options, seed, shift)
    src = device(SOURCES)
    cached, cached_logits = decoding.greedy(model, src, 8, return_logits=True)
    slow, slow_logits = decoding.greedy(model, src, 8, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(host(cached), host(slow))
    np.testing.assert_allclose(host(cached_logits), host(slow_logits), rtol=1e-9, atol=1e-9)
    logits = host(cached_logits)
    assert logits.shape == host(cached).shape + (7,)
    logits[:, :, PAD] = -np.inf  # <pad> is never generated
    before_eos = host(cached) != PAD
    np.testing.assert_array_equal(logits.argmax(axis=-1)[before_eos], host(cached)[before_eos])


def test_greedy_rows_end_with_eos_then_padding_and_stop_early(backend_name, device):
    model = make_model()
    tokens = decoding.greedy(model, device(SOURCES), 12)
    assert_decoded_format(tokens, 12)
    rows = host(tokens)
    assert rows.shape[1] < 12  # every row finished, so decoding stopped early
    assert (rows[:, -1] == PAD).any() and (rows == EOS).sum() == len(SOURCES)
    assert rows.dtype == host(device(SOURCES)).dtype


def test_greedy_stops_at_max_len_with_unfinished_rows(backend_name, device):
    tokens = decoding.greedy(make_model(), device(SOURCES), 2)
    assert host(tokens).shape == (3, 2)
    assert_decoded_format(tokens, 2)
    assert decoding.greedy(make_model(), device(SOURCES), 1).shape == (3, 1)


def test_decoding_switches_dropout_off(backend_name, device):
    model = make_model(dropout=0.5).train()
    tokens = decoding.greedy(model, device(SOURCES), 6)
    assert not model.training and not model.decoder.layers[0].self_attn.training
    np.testing.assert_array_equal(
        host(tokens), host(decoding.greedy(model.train(), device(SOURCES), 6))
    )


# ------------------------------------------------------------- beam search


@pytest.mark.parametrize("options, seed, shift", ENCODER_DECODERS)
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_of_size_one_is_greedy(float64, device, options, seed, shift, alpha):
    model = make_model(options, seed, shift)
    src = device(SOURCES)
    beam = decoding.beam_search(model, src, beam_size=1, max_len=8, length_penalty=alpha)
    np.testing.assert_array_equal(host(beam), host(decoding.greedy(model, src, 8)))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_beam_scores_are_the_recomputed_log_probabilities_and_beat_greedy(float64, device, alpha):
    model = make_model(eos_shift=2.0)
    src = device(SOURCES)
    best, beams, scores = decoding.beam_search(
        model, src, beam_size=3, max_len=6, length_penalty=alpha, return_all=True
    )
    assert host(beams).shape[:2] == (3, 3) and host(scores).shape == (3, 3)
    assert np.all(np.diff(host(scores), axis=1) <= 0)  # best first
    np.testing.assert_array_equal(host(best), host(beams)[:, 0, : host(best).shape[1]])
    assert_decoded_format(best, 6)
    for k in range(3):  # every beam's score, from the slow path: the caches followed the beams
        log_p, length = sequence_log_probs(model, src, beams[:, k])
        np.testing.assert_allclose(
            host(scores)[:, k], log_p / ((5 + length) / 6) ** alpha, rtol=1e-9
        )
    greedy_log_p, greedy_length = sequence_log_probs(model, src, decoding.greedy(model, src, 6))
    assert np.all(host(scores)[:, 0] >= greedy_log_p / ((5 + greedy_length) / 6) ** alpha - 1e-12)


class ScriptedModel:
    """A stand-in for a Transformer whose next-token probabilities come from
    a table keyed by the words fed so far (after <bos>), stored in its state.

    With beam_size=2: step 1 keeps A (0.6) and B (0.4); step 2 keeps B C
    (0.36, parent: beam 1) and A <eos> (0.21); step 3 ends B C with <eos>
    (0.324) only if the state followed B to beam 0. Greedy says A <eos>.
    """

    A, B, C = 3, 4, 5
    TABLE = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.35, C: 0.25, A: 0.2, B: 0.2},
             (B,): {C: 0.9, EOS: 0.1}, (B, C): {EOS: 0.9, A: 0.1}}
    config = types.SimpleNamespace(max_len=10, vocab_size=6, source_vocab_size=6)

    def eval(self):
        return self

    def start(self, src):
        return ScriptedState(src.shape[0])

    def step(self, state, tokens):
        state.fed = np.concatenate([state.fed, host(tokens)[:, None]], axis=1)
        probs = np.full((len(state.fed), 6), 1e-6)
        for row, fed in zip(probs, state.fed):
            for token, p in self.TABLE.get(tuple(fed[1:]), {EOS: 0.5, self.A: 0.5}).items():
                row[token] = p
        return backend.from_host(np.log(probs))


class ScriptedState:
    def __init__(self, batch):
        self.fed = np.zeros((batch, 0), dtype=int)

    def reorder(self, index, memory=True):  # no memory: nothing else to reorder
        self.fed = self.fed[host(index)]


def test_beam_search_follows_a_better_parent(float64, device):
    model, src = ScriptedModel(), device([[3]])
    best, beams, scores = decoding.beam_search(
        model, src, beam_size=2, length_penalty=0.0, return_all=True
    )
    np.testing.assert_array_equal(host(best), [[4, 5, 2]])
    np.testing.assert_array_equal(host(beams), [[[4, 5, 2], [3, 2, 0]]])
    np.testing.assert_allclose(host(scores), np.log([[0.4 * 0.9 * 0.9, 0.6 * 0.35]]), rtol=1e-4)
    np.testing.assert_array_equal(host(decoding.greedy(model, src, 5)), [[3, 2]])


def test_length_penalty():
    assert decoding.gnmt_length_penalty(1, 0.6) == 1.0
    assert decoding.gnmt_length_penalty(7, 0.0) == 1.0
    assert decoding.gnmt_length_penalty(7, 1.0) == 2.0


# ------------------------------------------------------------ sampling helpers


def test_top_k_keeps_exactly_k_even_with_ties(backend_name, device):
    logits = device([[0.1, 3.0, 2.0, 2.0, -1.0], [1.0, 1.0, 1.0, 1.0, 1.0]], dtype="float64")
    kept = host(decoding.top_k_filter(logits, 2))
    np.testing.assert_array_equal(np.isfinite(kept).sum(axis=1), [2, 2])
    np.testing.assert_array_equal(
        kept[0], [-np.inf, 3.0, 2.0, -np.inf, -np.inf]
    )  # first of the tie
    np.testing.assert_array_equal(host(decoding.top_k_filter(logits, 9)), host(logits))


def test_top_p_worked_example_and_always_one_token(backend_name, device):
    probs = device([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]], dtype="float64")
    kept = host(decoding.top_p_filter(probs, 0.9))
    np.testing.assert_allclose(kept[0], [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0])
    np.testing.assert_allclose(kept[0], [0.526, 0.316, 0.158, 0.0], atol=1e-3)
    np.testing.assert_allclose(kept[1], kept[0][::-1])  # order in the row does not matter
    np.testing.assert_allclose(
        host(decoding.top_p_filter(probs, 1e-9)), [[1, 0, 0, 0], [0, 0, 0, 1]]
    )
    np.testing.assert_allclose(
        host(decoding.top_p_filter(probs, 0.5)), [[1, 0, 0, 0], [0, 0, 0, 1]]
    )
    np.testing.assert_allclose(host(decoding.top_p_filter(probs, 1.0)), host(probs))


def test_temperature_divides_the_logits(backend_name, device):
    logits = device([[1.0, 2.0, 4.0]], dtype="float64")
    # logits / 2 less the row's largest, 2: the same softmax, nothing above 0
    np.testing.assert_allclose(host(decoding.apply_temperature(logits, 2.0)), [[-1.5, -1.0, 0.0]])
    sharp, flat = (host(softmax(decoding.apply_temperature(logits, t))) for t in (0.5, 5.0))
    assert sharp.max() > host(softmax(logits)).max() > flat.max()


@pytest.mark.parametrize("temperature", [1e-45, 5e-324, 1e-300])
def test_a_tiny_temperature_is_exactly_greedy(backend_name, device, temperature):
    """The old code divided float32 logits by T: 1e-45 made them +-inf and
    softmax inf - inf = NaN; sampling drew token 0 (<pad>) every step."""
    logits = device([[1.0, 3.0, 2.0, 3.0 - 1e-6], [-5.0, -7.0, -6.0, -np.inf]])
    probs = host(softmax(decoding.apply_temperature(logits, temperature)))
    assert np.isfinite(probs).all()
    np.testing.assert_array_equal(probs, [[0, 1, 0, 0], [1, 0, 0, 0]])
    model, src = make_model(), device(SOURCES)
    sampled = decoding.sample(model, src, 6, temperature=temperature, rng=3)
    np.testing.assert_array_equal(host(sampled), host(decoding.greedy(model, src, 6)))


def test_draw_follows_the_probabilities_and_never_draws_zero(backend_name, device):
    probs = device(np.tile([0.5, 0.0, 0.3, 0.2, 0.0], (20000, 1)), dtype="float64")
    drawn = host(decoding.draw(probs, backend.device_rng(0)))
    frequencies = np.bincount(drawn, minlength=5) / len(drawn)
    np.testing.assert_allclose(frequencies, [0.5, 0.0, 0.3, 0.2, 0.0], atol=0.02)
    assert frequencies[1] == 0 and frequencies[4] == 0


# ----------------------------------------------------------------- sampling


def test_sampling_repeats_for_a_seed_and_differs_for_another(backend_name, device):
    model, src = make_model(), device(SOURCES * 3)
    first = host(decoding.sample(model, src, 8, rng=1))
    assert_decoded_format(decoding.sample(model, src, 8, rng=1), 8)
    np.testing.assert_array_equal(first, host(decoding.sample(model, src, 8, rng=1)))
    np.testing.assert_array_equal(
        first, host(decoding.sample(model, src, 8, rng=backend.device_rng(1)))
    )
    other = host(decoding.sample(model, src, 8, rng=2))
    assert first.shape != other.shape or (first != other).any()


def test_sampling_with_top_k_one_is_greedy(backend_name, device):
    model, src = make_model(), device(SOURCES)
    greedy = host(decoding.greedy(model, src, 8))
    for options in [{"top_k": 1}, {"top_k": 1, "temperature": 3.0}, {"top_p": 1e-6}]:
        np.testing.assert_array_equal(
            host(decoding.sample(model, src, 8, rng=5, **options)), greedy
        )


# ---------------------------------------------------- decoder-only language model


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_language_model_cached_and_recomputed_generation_agree(float64, device, strategy):
    lm = make_model(seed=1, decoder_only=True)
    prompt = device(PROMPTS)
    cached, cached_logits = decoding.generate(
        lm, prompt, 9, strategy=strategy, rng=3, return_logits=True
    )
    slow, slow_logits = decoding.generate(lm, prompt, 9, strategy=strategy, rng=3, use_cache=False,
                                          return_logits=True)
    np.testing.assert_array_equal(host(cached), host(slow))
    np.testing.assert_allclose(host(cached_logits), host(slow_logits), rtol=1e-9, atol=1e-9)
    assert_decoded_format(cached, 9)


def test_language_model_greedy_continues_the_prompt(backend_name, device):
    lm = make_model(seed=1, decoder_only=True)
    prompt = device(PROMPTS)
    new = decoding.generate(lm, prompt, 6)
    ids = host(lm.forward(prompt)).argmax(axis=-1)[:, -1]  # the first new token, recomputed
    np.testing.assert_array_equal(host(new)[:, 0], ids)
    assert_decoded_format(new, 6)
    sampled = decoding.generate(lm, prompt, 6, strategy="sample", top_k=1, temperature=0.5)
    np.testing.assert_array_equal(host(sampled), host(new))
    assert decoding.generate(lm, device([[3], [4]]), 1).shape == (2, 1)  # a one-token prompt


def test_without_a_padding_token_nothing_is_banned_and_eos_may_be_none(backend_name, device):
    """A pretrained model has no <pad> (pad_id=None): every token may be
    chosen, as Hugging Face's greedy generate chooses; finished rows repeat
    <eos>, and with eos_id=None every row runs to max_new_tokens."""
    lm = make_model(seed=1, decoder_only=True, eos_shift=0.0)
    lm.output_projection.params["b"][PAD] += 100.0  # <pad> is now every step's argmax
    prompt = device(PROMPTS)
    assert (host(decoding.generate(lm, prompt, 4, pad_id=None)) == PAD).all()
    assert PAD not in host(decoding.generate(lm, prompt, 4))[:, 0]  # banned, as before
    lm.output_projection.params["b"][PAD] -= 100.0
    lm.output_projection.params["b"][EOS] += 100.0  # <eos> at once
    np.testing.assert_array_equal(host(decoding.generate(lm, prompt, 4, pad_id=None)),
                                  [[EOS], [EOS]])
    endless = host(decoding.generate(lm, prompt, 4, eos_id=None, pad_id=None))
    np.testing.assert_array_equal(endless, np.full((2, 4), EOS))


# ------------------------------------------------------------ attention maps


def test_decode_with_attention_gives_cross_attention_of_the_decoded_sentence(backend_name, device):
    model, src = make_model(), device(SOURCES)
    tokens, maps = decoding.decode_with_attention(model, src, 8)
    np.testing.assert_array_equal(host(tokens), host(decoding.greedy(model, src, 8)))
    cross = host(maps["decoder.layers.1.cross_attn.attention"])
    assert cross.shape == (3, 2, host(tokens).shape[1], 4)  # (B, h, L, T_src)
    source_is_real = (np.array(SOURCES) != PAD)[:, None, None, :]
    np.testing.assert_allclose((cross * source_is_real).sum(axis=-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(cross[~np.broadcast_to(source_is_real, cross.shape)], 0.0)


# --------------------------------------------------------------- bad input


def test_bad_arguments_are_named(backend_name, device):
    model, lm, src = make_model(), make_model(decoder_only=True), device(SOURCES)
    value_errors = [
        ("src", lambda: decoding.greedy(model, src[0], 5)),
        ("max_len", lambda: decoding.greedy(model, src, 0)),
        ("max_len", lambda: decoding.sample(model, src, 513)),
        ("beam_size", lambda: decoding.beam_search(model, src, beam_size=0)),
        ("max_len", lambda: decoding.beam_search(model, src, max_len=-1)),
        ("length_penalty", lambda: decoding.beam_search(model, src, length_penalty=-0.5)),
        ("temperature", lambda: decoding.sample(model, src, 5, temperature=0)),
        ("top_k", lambda: decoding.sample(model, src, 5, top_k=0)),
        ("top_p", lambda: decoding.sample(model, src, 5, top_p=0.0)),
        ("top_p", lambda: decoding.generate(lm, device(PROMPTS), 5, strategy="sample", top_p=1.5)),
        ("strategy", lambda: decoding.generate(lm, device(PROMPTS), 5, strategy="beam")),
        ("max_new_tokens", lambda: decoding.generate(lm, device(PROMPTS), 0)),
        ("prompt", lambda: decoding.generate(lm, device(np.zeros((2, 0), dtype=int)), 3)),
        ("k", lambda: decoding.top_k_filter(device([[1.0, 2.0]]), 0)),
        ("p", lambda: decoding.top_p_filter(device([[0.5, 0.5]]), 2)),
        ("temperature", lambda: decoding.apply_temperature(device([[1.0]]), -1.0)),
    ]
    for name, call in value_errors:
        with pytest.raises(ValueError) as info:
            call()
        assert_names(info, name)
    type_errors = [
        ("src", lambda: decoding.greedy(model, SOURCES, 5)),  # a list, not an array
        ("src", lambda: decoding.beam_search(model, device(np.array(SOURCES, dtype=float)))),
        ("rng", lambda: decoding.sample(model, src, 5, rng="seed")),
    ]
    if backend_name != "numpy":  # a host array where device arrays are needed
        type_errors.append(("src", lambda: decoding.greedy(model, np.array(SOURCES), 5)))
    for name, call in type_errors:
        with pytest.raises(TypeError) as info:
            call()
        assert_names(info, name)


def test_a_negative_seed_is_named_with_its_value(backend_name, device):
    """NumPy's own message named neither rng nor the value given."""
    model, lm, src = make_model(), make_model(decoder_only=True), device(SOURCES)
    for call in (lambda: decoding.sample(model, src, 5, rng=-1),
                 lambda: decoding.generate(lm, device(PROMPTS), 3, strategy="sample", rng=-1)):
        with pytest.raises(ValueError) as info:
            call()
        assert_names(info, "rng", "-1")


@pytest.mark.parametrize("use_cache", [True, False])
def test_ids_beyond_the_tokenizers_are_never_drawn(backend_name, device, use_cache):
    """A pretrained model pads its embedding beyond its tokenizer's ids:
    FirstIdsOnly keeps greedy and sampling to the ids below ``count``."""
    lm = make_model(seed=1, decoder_only=True, eos_shift=0.0)
    lm.output_projection.params["b"][6] += 100.0  # the last id is every step's argmax
    prompt = device(PROMPTS)
    options = dict(eos_id=None, pad_id=None, use_cache=use_cache)
    assert (host(decoding.generate(lm, prompt, 4, **options)) == 6).all()  # unmasked
    only = decoding.sampling.FirstIdsOnly(lm, 6)
    for strategy in ("greedy", "sample"):
        drawn = host(decoding.generate(only, prompt, 4, strategy=strategy, rng=0, **options))
        assert drawn.shape == (2, 4) and (drawn < 6).all(), drawn
    with pytest.raises(ValueError) as info:
        decoding.sampling.FirstIdsOnly(lm, 8)
    assert_names(info, "count", "8")
