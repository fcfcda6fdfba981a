"""From next-token logits to sentences: greedy, beam search and sampling.

A model only scores the next token; decoding picks one, feeds it back and
repeats, for the whole batch at once. Tokens come back as (B, L) int ids
without <bos>, each row ending at its <eos> with pad_id after it; L <= max_len,
as decoding stops once every row has produced <eos>.

Two rules let the cached path (``model.step``) and the recomputing path
(``model.prefix_logits``) see the same tokens, hence give the same logits:
<pad> is never generated (its logit becomes -inf) and a finished row is fed
<eos>, never <pad>, because recomputation masks <pad> keys and the cache does
not. Every public function calls ``model.eval()``: dropout off, always.
"""

import functools

from minitrans.core import backend, checks
from minitrans.decoding.input_checks import (check_length, check_model_kind, check_rows_fit,
                                             check_token_id)
from minitrans.decoding.sampling import sampler
from minitrans.decoding.shards import decode_in_shards, shard_count
from minitrans.decoding.token_loop import decode_loop, finished_filler, recomputing_feed
from minitrans.ops.softmax import log_softmax


def greedy(model, src, max_len, bos_id=1, eos_id=2, pad_id=0, use_cache=True, return_logits=False,
           workers=None):
    """The most probable token at every step, for a Transformer.

    use_cache=True encodes src (B, T_src) once (``model.start``) and feeds
    one token per step (``model.step``); use_cache=False reruns
    ``model.prefix_logits`` on the whole prefix every step: the slow reference.
    Returns tokens (B, L); with return_logits also the raw logits (B, L, V).

    ``workers``: threads that decode a share of the rows each
    (``decoding.shards``; default 2 on NumPy, 1 on a GPU; fewer where a
    shard would get under MIN_ROWS_PER_SHARD rows, and 1 with return_logits).
    """
    _check_encoder_decoder(model, src, max_len, bos_id)
    shards = _shards(src, workers, _way(use_cache))
    if shards > 1 and not return_logits:  # finished rows' logits would differ: one shard
        def decode_rows(replica, rows):
            return greedy(replica, rows, max_len, bos_id, eos_id, pad_id, use_cache, workers=1)

        return decode_in_shards(decode_rows, model, src, finished_filler(eos_id, pad_id), shards)
    feed, first = _start_encoder_decoder(model, src, bos_id, use_cache, max_len)
    tokens, logits = decode_loop(feed, first, max_len, _argmax, eos_id, pad_id, return_logits)
    return (tokens, logits) if return_logits else tokens


def sample(model, src, max_len, temperature=1.0, top_k=None, top_p=None, rng=None,
           bos_id=1, eos_id=2, pad_id=0, use_cache=True):
    """Draw every token at random, for a Transformer. Each step: logits ->
    apply_temperature -> top_k_filter (if top_k) -> softmax -> top_p_filter
    (if top_p) -> draw. ``rng``: an int seed (None is 0, so runs repeat) or a
    ``backend.device_rng`` generator. Returns tokens (B, L) as greedy."""
    choose = sampler(temperature, top_k, top_p, rng)
    _check_encoder_decoder(model, src, max_len, bos_id)
    feed, first = _start_encoder_decoder(model, src, bos_id, use_cache, max_len)
    return decode_loop(feed, first, max_len, choose, eos_id, pad_id)[0]


def beam_search(model, src, beam_size=4, max_len=None, length_penalty=0.6,
                bos_id=1, eos_id=2, pad_id=0, return_all=False, workers=None):
    """Keep the beam_size best partial translations of each source row.

    The B * K hypotheses (K = beam_size) decode as one batch, row b*K + k
    being beam k of source b. The encoder runs once; ``state.reorder``
    repeats its output K times and, after each step, makes every beam's
    key/value caches follow the parent it extends. A hypothesis Y scores

        log P(Y | src) / lp(Y),   lp(Y) = ((5 + |Y|) / 6) ** alpha    (GNMT)

    with |Y| its token count, <eos> included, and alpha = length_penalty
    (0: raw log-probability; larger: fairer to long sentences). Each step
    keeps the K best candidates by this score; a finished one keeps its
    score, its only continuation being <pad> at cost 0. beam_size is at most
    the vocabulary's size. Stops when all beams
    have finished, or after max_len tokens (default T_src + 50). Returns the
    best tokens (B, L); with return_all also all beams, best first,
    (B, K, L_all), and their scores (B, K). ``workers``: as ``greedy``'s,
    each thread searching for some of the source rows.
    """
    xp = backend.get_xp()
    check_model_kind("model", model, decoder_only=False)
    checks.check_token_ids("src", src, ndim=2, nonempty=True)
    checks.check_positive_int("beam_size", beam_size)
    if beam_size > model.config.vocab_size:  # more beams would only hold probability 0
        raise ValueError(f"beam_size: expected at most the vocabulary's size, "
                         f"{model.config.vocab_size}, got {beam_size}")
    check_rows_fit(f"src with beam_size={beam_size}", src.shape[0] * beam_size, model.config,
                   src.shape[1], what="hypotheses (rows x beam_size)")
    max_len = min(src.shape[1] + 50, model.config.max_len) if max_len is None else max_len
    check_length("max_len", max_len, model)
    check_token_id("bos_id", bos_id, model)
    checks.check_number("length_penalty", length_penalty, low=0)
    shards = _shards(src, workers, "beam")
    if shards > 1:
        def search_rows(replica, rows):
            return beam_search(replica, rows, beam_size, max_len, length_penalty, bos_id, eos_id,
                               pad_id, return_all, workers=1)

        return decode_in_shards(search_rows, model, src, pad_id, shards)
    model.eval()
    B, K = src.shape[0], beam_size
    rows = xp.arange(B)[:, None]  # (B, 1): pairs each beam with its source row
    state = model.start(src)
    state.reorder(xp.repeat(xp.arange(B), K))
    log_prob = xp.full((B, K), -xp.inf, dtype=backend.get_dtype())
    log_prob[:, 0] = 0.0  # one live beam per row to start with, not K copies of it
    lengths, finished = xp.zeros((B, K), dtype=src.dtype), xp.zeros((B, K), dtype=bool)
    history = xp.empty((B * K, max_len), dtype=src.dtype)  # row b*K + k: beam k's tokens
    spare = xp.empty_like(history)  # where the next step's reordered history is written
    tokens = xp.full((B * K,), bos_id, dtype=src.dtype)
    for step in range(max_len):
        with checks.inputs_checked():  # tokens the model chose: in range
            step_log_probs = log_softmax(model.step(state, tokens)).reshape(B, K, -1)
        if step == 0:  # the vocabulary's size is known now: the rules on <pad>, once
            rules = _pad_rules(step_log_probs.shape[-1], step_log_probs.dtype, pad_id)
        candidates = log_prob[:, :, None] + _continuations(step_log_probs, finished, *rules)
        V = candidates.shape[-1]  # candidates (B, K, V): every beam times every token
        new_lengths = lengths + ~finished  # finished hypotheses do not grow
        ranking = candidates / gnmt_length_penalty(new_lengths, length_penalty)[:, :, None]
        best = xp.argsort(-ranking.reshape(B, K * V), axis=-1, kind="stable")[:, :K]
        parent, token = best // V, (best % V).astype(src.dtype)  # (B, K) each
        log_prob = candidates.reshape(B, K * V)[rows, best]
        lengths, finished = new_lengths[rows, parent], finished[rows, parent] | (token == eos_id)
        parents = (rows * K + parent).reshape(-1)
        xp.take(history[:, :step], parents, axis=0, out=spare[:, :step])  # follow the parents
        history, spare = spare, history
        history[:, step] = token.reshape(-1)
        state.reorder(parents, memory=False)  # caches follow the parents; sources stay
        if bool(finished.all()):
            break
        tokens = xp.where(finished, eos_id, token).reshape(-1)
    scores = log_prob / gnmt_length_penalty(lengths, length_penalty)
    order = xp.argsort(-scores, axis=-1, kind="stable")
    history = history[:, : step + 1].reshape(B, K, step + 1)
    beams, scores, lengths = history[rows, order], scores[rows, order], lengths[rows, order]
    best_tokens = beams[:, 0, : int(lengths[:, 0].max())]
    return (best_tokens, beams, scores) if return_all else best_tokens


def gnmt_length_penalty(length, alpha):
    """lp = ((5 + length) / 6) ** alpha, elementwise (1 for length 1 or alpha 0)."""
    length = backend.get_xp().asarray(
        length, dtype=backend.get_dtype()
    )  # integer lengths would give float64
    return ((5.0 + length) / 6.0) ** alpha


def generate(lm, prompt, max_new_tokens, eos_id=2, pad_id=0, use_cache=True, strategy="greedy",
             temperature=1.0, top_k=None, top_p=None, rng=None, return_logits=False,
             workers=None):
    """Continue prompt (B, T0), int ids without padding, with a DecoderOnlyLM.

    The cached path feeds the prompt to ``lm.step`` one token at a time, the
    other reruns ``lm.prefix_logits`` on the whole prefix every step. strategy
    "sample" takes temperature, top_k, top_p, rng as ``sample`` does. Returns
    the new tokens (B, L <= max_new_tokens) as greedy; with return_logits
    also their logits (B, L, V).

    A pretrained model has no padding token (its config's pad_id is None):
    with ``pad_id=None`` no token is banned, and a row that has finished
    repeats ``eos_id`` (as Hugging Face's ``generate`` fills with its pad
    token, usually the end-of-text token); with ``eos_id=None`` no token
    ends a row, and all ``max_new_tokens`` are generated.

    ``workers``: as ``greedy``'s, for strategy "greedy" (sampling draws for
    the whole batch at once, so its rows stay together).
    """
    check_model_kind("lm", lm, decoder_only=True)
    checks.check_token_ids("prompt", prompt, lm.config.vocab_size, ndim=2, nonempty=True)
    check_length("max_new_tokens", max_new_tokens, lm, prompt_length=prompt.shape[1])
    check_rows_fit("prompt", prompt.shape[0], lm.config)
    checks.check_choice("strategy", strategy, ("greedy", "sample"))
    shards = _shards(prompt, workers, _way(use_cache))
    if shards > 1 and strategy == "greedy" and not return_logits:
        def generate_rows(replica, rows):
            return generate(replica, rows, max_new_tokens, eos_id, pad_id, use_cache, workers=1)

        return decode_in_shards(generate_rows, lm, prompt, finished_filler(eos_id, pad_id), shards)
    choose = _argmax if strategy == "greedy" else sampler(temperature, top_k, top_p, rng)
    lm.eval()
    seen, last = prompt[:, :-1], prompt[:, -1]  # the loop feeds the last prompt token
    if use_cache:
        state = lm.start(prompt.shape[0])
        with checks.inputs_checked():  # the prompt's ids were checked above, once
            for t in range(seen.shape[1]):
                lm.step(state, seen[:, t])
        feed = functools.partial(lm.step, state)
    else:
        feed = recomputing_feed(lm.prefix_logits, seen, max_new_tokens)
    tokens, logits = decode_loop(feed, last, max_new_tokens, choose, eos_id, pad_id, return_logits)
    return (tokens, logits) if return_logits else tokens


def _check_encoder_decoder(model, src, max_len, bos_id):
    check_model_kind("model", model, decoder_only=False)
    checks.check_token_ids("src", src, model.config.source_vocab_size, ndim=2, nonempty=True)
    check_rows_fit("src", src.shape[0], model.config, src.shape[1])
    check_length("max_len", max_len, model)
    check_token_id("bos_id", bos_id, model)


def _way(use_cache):
    return "cache" if use_cache else "recompute"


def _shards(rows, workers, way):
    """How many shards the (B, ...) ``rows`` decode in (``shards.shard_count``)."""
    if workers is not None:
        checks.check_positive_int("workers", workers)
        if workers > 1 and backend.on_device():
            raise ValueError(f"workers: expected 1 on the {backend.backend_name()} backend (the "
                             f"threads would take turns queueing work on one CUDA stream), "
                             f"got {workers}")
    return shard_count(rows.shape[0], way, workers)


def _start_encoder_decoder(model, src, bos_id, use_cache, max_len):
    """Switch to eval mode (the input checked); return feed and the <bos> column."""
    model.eval()
    first = backend.get_xp().full((src.shape[0],), bos_id, dtype=src.dtype)
    if use_cache:
        with checks.inputs_checked():  # src was checked above: start need not check it again
            state = model.start(src)  # encodes src once, here
        return functools.partial(model.step, state), first
    feed = recomputing_feed(lambda prefix: model.prefix_logits(src, prefix), src[:, :0], max_len)
    return feed, first


def _argmax(logits):
    return backend.get_xp().argmax(logits, axis=-1)


def _pad_rules(vocab_size, dtype, pad_id):
    """is_pad (V,), True at <pad>, and only_pad (V,), log-probabilities 0 at
    <pad> and -inf elsewhere: what ``_continuations`` needs, made once."""
    xp = backend.get_xp()
    only_pad = xp.full(vocab_size, -xp.inf, dtype=dtype)
    only_pad[pad_id] = 0.0
    return xp.arange(vocab_size) == pad_id, only_pad


def _continuations(step_log_probs, finished, is_pad, only_pad):
    """Next-token log-probabilities (B, K, V) of each beam: <pad> (where
    ``is_pad``, (V,)) is banned for live beams and is the only, free
    (log 1 = 0), option of finished ones: ``only_pad`` (V,)."""
    xp = backend.get_xp()
    live = xp.where(is_pad, -xp.inf, step_log_probs)
    return xp.where(finished[:, :, None], only_pad, live)
