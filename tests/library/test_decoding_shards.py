"""Decoding in shards (minitrans.decoding.shards): the rows split over
threads give exactly the batch's tokens, beams and scores."""

import numpy as np
import pytest

import minitrans
from minitrans import decoding
from minitrans.decoding import shards
from tests.library.test_decoding import BOS, PAD, make_model

SOURCES = np.random.default_rng(3).integers(3, 7, size=(7, 5))
PROMPTS = np.concatenate([np.full((7, 1), BOS), SOURCES[:, :3]], axis=1)  # no padding
SOURCES[[1, 4, 5], 3:] = PAD  # shorter sources, padded: the masks must match too


@pytest.fixture
def every_row_count_shards(monkeypatch):
    """Shards from one row up, so that small test batches split."""
    monkeypatch.setattr(shards, "MIN_ROWS_PER_SHARD", {"cache": 1, "recompute": 1, "beam": 1})


def assert_same(sharded, whole):
    """Token ids equal; scores equal to float32's rounding (a product of
    fewer rows may add its terms in another order)."""
    for ours, theirs in zip(sharded, whole):
        ours, theirs = minitrans.to_numpy(ours), minitrans.to_numpy(theirs)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        if ours.dtype.kind == "f":
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)
        else:
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("workers", [2, 3])
def test_greedy_in_shards_gives_the_whole_batchs_tokens(every_row_count_shards, use_cache,
                                                        workers):
    model, src = make_model(), minitrans.to_device(SOURCES)

    whole = decoding.greedy(model, src, 9, use_cache=use_cache, workers=1)
    sharded = decoding.greedy(model, src, 9, use_cache=use_cache, workers=workers)
    lengths = (minitrans.to_numpy(whole) != PAD).sum(axis=1)
    assert lengths.min() < lengths.max()  # the shards end at different lengths: padding shows
    assert_same([sharded], [whole])


@pytest.mark.parametrize("return_all", [False, True])
def test_beam_search_in_shards_gives_the_whole_batchs_beams(every_row_count_shards, return_all):
    model, src = make_model(), minitrans.to_device(SOURCES)

    def search(workers):
        return decoding.beam_search(model, src, beam_size=3, max_len=9, return_all=return_all,
                                    workers=workers)

    whole, sharded = search(workers=1), search(workers=2)
    if not return_all:
        whole, sharded = [whole], [sharded]
    assert_same(sharded, whole)


def test_language_model_greedy_in_shards_gives_the_whole_batchs_tokens(every_row_count_shards):
    lm, prompt = make_model(seed=1, decoder_only=True), minitrans.to_device(PROMPTS)

    whole = decoding.generate(lm, prompt, 8, workers=1)
    lengths = (minitrans.to_numpy(whole) != PAD).sum(axis=1)
    assert lengths.min() < lengths.max()
    assert_same([decoding.generate(lm, prompt, 8, workers=2)], [whole])


def test_replicas_follow_the_models_new_parameters(every_row_count_shards):
    model, src = make_model(seed=0), minitrans.to_device(SOURCES)
    decoding.greedy(model, src, 6, workers=2)  # makes and keeps the replica
    other = make_model(seed=5)
    for (_, mine), (_, theirs) in zip(model.named_modules(), other.named_modules()):
        mine.params.update(theirs.params)  # as a checkpoint load replaces the arrays
    assert_same([decoding.greedy(model, src, 6, workers=2)],
                [decoding.greedy(other, src, 6, workers=1)])


def test_a_replica_is_made_again_when_the_models_layers_change(every_row_count_shards):
    model, src = make_model(), minitrans.to_device(SOURCES)
    decoding.greedy(model, src, 6, workers=2)
    model.decoder.layers = model.decoder.layers[:1]  # a learner drops a layer
    assert_same([decoding.greedy(model, src, 6, workers=2)],
                [decoding.greedy(model, src, 6, workers=1)])


def test_a_shard_gets_at_least_its_minimum_rows():
    assert shards.shard_count(127, "cache", workers=2) == 1  # 63 rows a shard: too few
    assert shards.shard_count(128, "cache", workers=2) == 2
    assert shards.shard_count(15, "recompute", workers=2) == 1
    assert shards.shard_count(16, "recompute", workers=2) == 2
    assert shards.shard_count(7, "beam", workers=2) == 1
    assert shards.shard_count(8, "beam", workers=2) == 2
    assert shards.shard_count(1000, "recompute", workers=1) == 1
    assert shards.shard_count(1000, "recompute", workers=3) == 3


def test_a_strategy_that_cannot_split_runs_whole(every_row_count_shards, monkeypatch):
    model, lm = make_model(), make_model(decoder_only=True)
    monkeypatch.setattr(shards, "decode_in_shards", None)  # a call would fail
    decoding.greedy(model, minitrans.to_device(SOURCES), 5, return_logits=True, workers=2)
    decoding.generate(lm, minitrans.to_device(PROMPTS), 5, strategy="sample", workers=2)


def test_bad_workers_are_named(backend_name):
    model, src = make_model(), minitrans.to_device(SOURCES)
    with pytest.raises(ValueError, match="workers: expected a positive integer, got 0"):
        decoding.greedy(model, src, 5, workers=0)
    with pytest.raises(ValueError, match="workers: expected a positive integer, got 0"):
        decoding.greedy(model, src, 5, return_logits=True, workers=0)  # one shard, still checked
    if backend_name != "numpy":
        with pytest.raises(ValueError, match="workers: expected 1 on the"):
            decoding.beam_search(model, src, workers=2)
