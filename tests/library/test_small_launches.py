"""The small launches around the model on a device, each family cut to what
it needs: the range check of token ids, the decoder's mask, the embedding's
scale with the positions' add, the copy of Adam's step values, the loss's
ids 0..V-1, a batch's copy to the device. Each test counts the launches on
the strict backend, shows that the old way (planted back) launches more,
and checks the numbers against the numpy backend's, which runs as before.
"""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, capture, checks
from minitrans.core.launches import count_launches
from minitrans.data import batches
from minitrans.layers import loss_device
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.model.input_embedding import InputEmbedding
from minitrans.ops import masks
from minitrans.training.optimisation.flat_state import FlatState

PAD = 0


@pytest.fixture
def strict():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


def places(action):
    """The launches of ``action()``, by kind."""
    with count_launches() as launches:
        action()
    return launches.places


def on_host_path(monkeypatch):
    """Plants the old behaviour: every ``on_device`` question answered no,
    so the strict backend runs the code the numpy backend runs."""
    monkeypatch.setattr(backend, "on_device", lambda: False)


def token_ids(*rows):
    return backend.to_device(np.array(rows, dtype=np.int64))


# -- 1. the range check of token ids -------------------------------------------

def test_the_range_check_is_one_fused_reduction_where_the_old_took_four(strict, monkeypatch):
    ids = token_ids([1, 2, 3], [4, 0, 0])
    assert places(lambda: checks.check_token_ids("ids", ids, 5)) == [
        "fused token_ids_outside_vocabulary"]
    on_host_path(monkeypatch)  # the old check: less, greater_equal, bitwise_or, any
    assert len(places(lambda: checks.check_token_ids("ids", ids, 5))) == 4


@pytest.mark.parametrize("bad, shown", [(5, 5), (-2, -2)])
def test_the_range_check_refuses_as_on_numpy(backend_name, bad, shown):
    assert int(checks.count_outside_vocabulary(token_ids([1, bad, 3, bad]), 5)) == 2
    checks.check_token_ids("ids", token_ids([0, 4]), 5)
    with pytest.raises(ValueError, match=rf"ids: expected token ids in \[0, 5\), got {shown}"):
        checks.check_token_ids("ids", token_ids([1, bad, 3]), 5)


# -- 2. the decoder's mask -------------------------------------------------------

def test_the_decoder_mask_is_one_kernel_once_the_causal_part_is_kept(strict, monkeypatch):
    ids = token_ids([5, 6, PAD, PAD], [7, 8, 9, PAD])
    masks.decoder_mask(ids, PAD)  # keeps the causal mask of this length
    assert places(lambda: masks.decoder_mask(ids, PAD)) == ["fused decoder_mask"]
    assert places(lambda: masks.decoder_mask(ids, None)) == ["copy"]
    on_host_path(monkeypatch)  # the old mask: not_equal, ones, tril, bitwise_and
    assert len(places(lambda: masks.decoder_mask(ids, PAD))) == 4


@pytest.mark.parametrize("pad_id", [PAD, None])
def test_the_decoder_mask_equals_numpys_at_growing_and_shrinking_lengths(pad_id):
    rng = np.random.default_rng(0)
    for length in (3, 6, 2, 6, 7):
        host = rng.integers(0, 4, size=(2, length))
        with minitrans.using("numpy"):
            expected = masks.decoder_mask(host, pad_id)
        with minitrans.using("strict"):
            got = masks.decoder_mask(backend.to_device(host), pad_id)
            got[...] = False  # a fresh array: writing into it leaves the kept mask alone
            again = minitrans.to_numpy(masks.decoder_mask(backend.to_device(host), pad_id))
        assert again.dtype == bool and np.array_equal(again, expected)


# -- 3. the embedding's scale and the positions' add -------------------------------

def embedding_on(name, positions, ids, offset=0):
    """Output and table gradient of an InputEmbedding (dropout 0) on backend ``name``."""
    with minitrans.using(name, dtype="float32"):
        layer = InputEmbedding(11, 8, max_len=16, dropout=0.0, rng=3, positions=positions)
        out = layer.forward(backend.to_device(ids), offset=offset)
        layer.backward(backend.from_host(np.linspace(-1.0, 1.0, out.size).reshape(out.shape)))
        return minitrans.to_numpy(out), minitrans.to_numpy(layer.embedding.grads["W_E"])


def test_the_scale_rides_with_the_positions_add_in_one_kernel(strict, monkeypatch):
    layer = InputEmbedding(11, 8, max_len=16, dropout=0.0, rng=3)
    ids = token_ids([1, 2, 3], [4, 5, 6])

    def forward():
        with checks.inputs_checked():  # the checks of ids and x aside
            layer.forward(ids, offset=2)

    assert places(forward) == ["gather", "fused scale_and_add_positions"]
    on_host_path(monkeypatch)  # the old forward
    assert places(forward) == ["gather", "multiply", "add"]


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_the_fused_embedding_equals_numpys_bit_for_bit(positions):
    ids = np.array([[1, 2, 10], [4, 0, 7]])
    for offset in (0, 5):
        expected, got = (embedding_on(name, positions, ids, offset) for name in ("numpy", "strict"))
        for want, have in zip(expected, got):
            assert have.dtype == want.dtype and np.array_equal(have, want)


# -- 4. Adam's step values ----------------------------------------------------------

def write_step_values_as_before(flat, values):
    """The old write: a copy from the host into a fresh array, then a setitem."""
    flat.step_values[...] = backend.get_xp().asarray(values, dtype=flat.step_values.dtype)


def one_layer_state():
    layer = InputEmbedding(5, 4, max_len=8, dropout=0.0, rng=0)
    module = layer.embedding
    m = {"W_E": backend.get_xp().zeros_like(module.params["W_E"])}
    return FlatState([("W_E", module, "W_E")], m, dict(m), holds_parameters=True)


def test_the_step_values_go_straight_from_the_host_in_one_transfer(strict):
    flat, values = one_layer_state(), [0.01, 1.0 / 0.1, 1.0 / 0.001, 1e-4, 0.5]
    assert places(lambda: flat.write_step_values(values)) == ["transfer (set)"]
    assert np.array_equal(minitrans.to_numpy(flat.step_values), np.float32(values))
    assert places(lambda: write_step_values_as_before(flat, values)) == [
        "transfer (asarray)", "setitem"]


def test_the_step_values_on_numpy_are_the_same_numbers():
    with minitrans.using("numpy", dtype="float32"):
        flat = one_layer_state()
        flat.write_step_values([0.1, 1.0 / 3.0, 7, 1e-9, 0.5])
        assert np.array_equal(flat.step_values, np.float32([0.1, 1.0 / 3.0, 7, 1e-9, 0.5]))


def test_strict_set_refuses_what_cupy_refuses(strict):
    target = strict.zeros(4, dtype="float32")
    for wrong in ([1.0, 2.0, 3.0, 4.0], np.zeros(4), np.zeros(3, dtype=np.float32),
                  strict.zeros(4, dtype="float32")):  # a list, float64, a shape, a device array
        with pytest.raises(TypeError, match="set: expected a NumPy array of float32"):
            target.set(wrong)
    with pytest.raises(TypeError, match="set: expected"):
        strict.zeros(8, dtype="float32")[::2].set(np.zeros(4, dtype=np.float32))  # strided


def test_a_replayed_set_writes_the_values_it_was_recorded_with(strict):
    target = strict.zeros(2, dtype="float32")
    with capture.record_stretch() as stretch:
        target.set(np.float32([1.0, 2.0]))
    target.set(np.float32([5.0, 6.0]))
    stretch.replay()  # a graph's copy from the host reads the host memory it was given
    assert np.array_equal(minitrans.to_numpy(target), [1.0, 2.0])


# -- 5. the loss's ids 0..V-1 -----------------------------------------------------

def loss_backward_places(monkeypatch=None):
    loss = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    logits = backend.from_host(np.linspace(-2.0, 2.0, 2 * 3 * 7).reshape(2, 3, 7))
    loss.forward(logits, token_ids([1, 2, PAD], [3, 6, 5]))
    return places(loss.backward)


def test_the_loss_backward_keeps_its_vocabulary_ids(strict, monkeypatch):
    loss_backward_places()
    assert loss_backward_places() == ["fused cross_entropy_backward"]
    ids = loss_device.vocabulary_ids(7)
    assert ids is loss_device.vocabulary_ids(7) and ids.tolist() == list(range(7))
    monkeypatch.setattr(loss_device, "vocabulary_ids", strict.arange)  # the old: made each time
    assert loss_backward_places() == ["arange", "fused cross_entropy_backward"]


# -- a batch's arrays, one copy to the device -------------------------------------

def test_a_batch_travels_to_the_device_in_one_copy(strict, monkeypatch):
    pairs = [([4, 5, 6], [7, 8]), ([9], [10, 11, 12, 13])]
    batch = batches.make_seq2seq_batch(pairs)
    assert places(lambda: batches.make_seq2seq_batch(pairs)) == ["transfer (asarray)"]
    with minitrans.using("numpy"):
        expected = batches.make_seq2seq_batch(pairs)
    for name in ("src", "tgt_in", "tgt_out"):
        assert np.array_equal(minitrans.to_numpy(getattr(batch, name)), getattr(expected, name))
    on_host_path(monkeypatch)  # the old way: a copy for each array
    assert places(lambda: batches.make_seq2seq_batch(pairs)) == ["transfer (asarray)"] * 3
