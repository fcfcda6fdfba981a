"""What CuPy does differently from NumPy, checked without a GPU.

One test (or more) per entry of the README's list ("CuPy's differences, and
how minitrans meets them"): either the strict backend refuses the pattern
exactly where CuPy would fail, or the test shows why minitrans is safe.
The lists of names CuPy lacks were read from CuPy 14.2 against NumPy 2.4.
"""

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, strict as strict_backend
from minitrans.layers.add_norm import AddNorm
from minitrans.layers.dropout import Dropout
from minitrans.layers.module import Module
from minitrans.ops import random_bits, softmax
from minitrans.training.optimisation.adam import Adam
from tests.conftest import tiny_trainer


@pytest.fixture
def strict():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


# ---- 1. add.at: CuPy 14 has ufunc.at; numpy.add.at on a device array fails


def test_scatter_add_goes_through_the_backend_and_numpy_add_at_is_refused(strict):
    table = strict.zeros((3, 2))
    strict.add.at(table, strict.asarray([0, 0, 2]), strict.ones((3, 2)))
    np.testing.assert_array_equal(minitrans.to_numpy(table), [[2, 2], [0, 0], [1, 1]])
    with pytest.raises(TypeError, match="numpy.add.at was called on a device array"):
        np.add.at(table, strict.asarray([0]), 1.0)


# ---- 2. a device array as an index or a size, and copies from the host


def test_a_device_scalar_is_no_index(strict):
    n = strict.asarray(3)
    with pytest.raises(TypeError, match="no __index__"):
        range(n)
    with pytest.raises(TypeError, match="no __index__"):
        [0, 1, 2, 3][n]
    assert int(n) == 3  # the explicit conversion, a counted wait, is the way


def test_ascontiguousarray_refuses_host_data_as_cupy_does(strict):
    with pytest.raises(TypeError, match="NumPy array"):
        strict.ascontiguousarray(np.ones((2, 3)))
    device = strict.asarray(np.ones((3, 2))).T
    assert strict.ascontiguousarray(device).flags.c_contiguous


# ---- 3. NumPy names CuPy does not have


@pytest.mark.parametrize("name", ["errstate", "seterr", "insert", "vecdot"])
def test_module_functions_cupy_lacks_are_refused(strict, name):
    with pytest.raises(AttributeError, match=f"'{name}'.*CuPy"):
        getattr(strict, name)
    assert hasattr(np, name)


@pytest.mark.parametrize("name", ["bit_generator", "permutation", "normal", "choice"])
def test_generator_methods_cupy_lacks_are_refused(strict, name):
    rng = backend.device_rng(0)
    with pytest.raises(AttributeError, match=f"'{name}'.*CuPy"):
        getattr(rng, name)
    rng.random((2, 2))  # what sampling uses: CuPy's Generator has it


def test_array_attributes_cupy_lacks_are_refused(strict):
    with pytest.raises(AttributeError, match="'setflags'.*CuPy"):
        strict.ones(3).setflags(write=False)


def test_minitrans_calls_no_module_function_cupy_lacks():
    """No module of the library spells a refused name as ``xp.NAME``: the
    strict tests would only find it on the paths they run. (Generators on
    the device are sampling's alone, and its tests run on strict.)"""
    import pathlib
    import re

    root = pathlib.Path(minitrans.__file__).parent
    names = "|".join(sorted(strict_backend.NOT_IN_CUPY))
    pattern = re.compile(rf"\b(?:xp|get_xp\(\))\.({names})\b")
    found = [f"{path.relative_to(root)}: {match.group(0)}"
             for path in root.rglob("*.py") for match in pattern.finditer(path.read_text())]
    assert not found, found
    assert pattern.search("xp.errstate(all='ignore')")  # the pattern finds what it looks for


# ---- 4. may_share_memory: CuPy's compares memory bounds, as NumPy's default does


def test_may_share_memory_answers_alike_for_what_add_norm_asks(strict):
    x = strict.ones((2, 3, 4), dtype="float32")
    assert strict.may_share_memory(x, x[:, 1:]) and not strict.may_share_memory(x, x.copy())
    # AddNorm asks whether a sublayer returned (a view of) its input: it must copy then
    layer = AddNorm(4, dropout=0.0).eval()
    layer.forward(x, _Identity())  # an identity sub-layer returns x itself
    np.testing.assert_allclose(minitrans.to_numpy(x), 1.0)  # x was not written over


class _Identity(Module):
    def forward(self, x):
        return x

    def backward(self, dy):
        return dy


# ---- 5. random numbers: dropout's masks are the same on every backend


def test_dropout_masks_are_the_same_on_numpy_strict_and_in_pure_python():
    """The masks come from integer arithmetic mod 2^64, which CuPy does as
    NumPy does; a pure-Python reference of the hash pins the numbers."""
    masks = {}
    for name in ("numpy", "strict"):
        with minitrans.using(name, dtype="float64"):
            layer = Dropout(0.5, rng=3)
            layer.reset_rng(step=7)
            masks[name] = minitrans.to_numpy(layer(backend.get_xp().ones((4, 5)))) > 0
    np.testing.assert_array_equal(masks["numpy"], masks["strict"])
    key = random_bits.stream_key(Dropout(0.5, rng=3).seed, 8, 0)
    expected = [random_bits.mix_reference((key + (i + 1) * random_bits.GOLDEN_GAMMA) % 2**64)
                for i in range(5)]
    with minitrans.using("strict"):
        drawn = random_bits.random_uint64(key, 5).tolist()
    assert drawn == expected
    halves = np.array(expected, dtype=np.uint64).view(np.uint16)[:20].reshape(4, 5)
    np.testing.assert_array_equal(masks["numpy"], halves >= round(0.5 * 2**16))


def test_a_training_step_makes_no_random_generator_on_the_device(strict, tmp_path, monkeypatch):
    """On CuPy every generator allocates its states: dropout, in every layer
    at every step, must not make one (it did, one per layer per step)."""
    trainer = tiny_trainer(tmp_path)
    made = []  # what the old dropout called in every layer at every step
    monkeypatch.setattr(backend, "device_rng", lambda seed: made.append(seed))
    trainer.train_step()
    assert made == []
    assert any(isinstance(m, Dropout) and m.p > 0 for m in trainer.model.modules())


def test_the_reference_hash_catches_a_wrong_multiplier(monkeypatch):
    key = random_bits.stream_key(1, 2)
    right = random_bits.mix_reference((key + random_bits.GOLDEN_GAMMA) % 2**64)
    monkeypatch.setattr(random_bits, "MIX_MULTIPLIERS", (0xBF58476D1CE4E5B9, 0x94D049BB133111EA))
    with minitrans.using("numpy"):
        assert random_bits.random_uint64(key, 1).tolist() != [right]


def test_dropout_streams_differ_by_seed_step_and_draw(strict):
    layer = Dropout(0.5, rng=0)
    ones = strict.ones(2000)
    first, second = (minitrans.to_numpy(layer(ones)) > 0 for _ in range(2))
    layer.reset_rng(step=1)
    stepped = minitrans.to_numpy(layer(ones)) > 0
    for a, b in ((first, second), (first, stepped), (second, stepped)):
        assert 0.4 < (a == b).mean() < 0.6  # independent: they agree half the time


# ---- 6. dtype promotion: Python floats keep the array's dtype under both rules


def test_python_scalars_keep_float32_as_numpy_2_and_cupy_14_promote(strict):
    x = strict.ones(3, dtype="float32")
    assert (x * 0.5).dtype == np.float32 and (x / 8.0 ** 0.5).dtype == np.float32
    with strict_backend.forbid_float64():
        with pytest.raises(TypeError, match="float64"):
            x * np.float64(0.5)  # a NumPy float64 scalar is strong under NumPy 2 (NEP 50)


# ---- 7. writes into broadcast views


def test_writing_into_a_broadcast_view_fails_instead_of_writing_shared_memory(strict):
    """CuPy's broadcast views are writable and share one element between
    many places; NumPy's are read-only, so the write fails here, on the CPU."""
    row = strict.zeros(4)
    wide = strict.broadcast_to(row, (3, 4))
    with pytest.raises(ValueError, match="read-only"):
        wide[...] += 1.0
    with pytest.raises(ValueError, match="read-only"):
        strict.copyto(wide, 1.0)


# ---- 8. repeated indices in an assignment, and casts of floats to integers


def test_an_assignment_that_writes_one_element_twice_is_refused(strict):
    x = strict.zeros(4)
    x[strict.asarray([0, 2])] = strict.asarray([1.0, 2.0])  # distinct targets: fine
    x[:, ] = 0.0
    with pytest.raises(TypeError, match="repeated index.*xp.add.at"):
        x[strict.asarray([1, 1])] = strict.asarray([1.0, 2.0])  # NumPy: 2.0; CuPy: either
    grid = strict.zeros((2, 3))
    with pytest.raises(TypeError, match="repeated index"):
        grid[strict.asarray([0, 0]), strict.asarray([1, 1])] = 1.0
    grid[strict.asarray([0, 1]), strict.asarray([1, 1])] = 1.0  # two rows: two elements


def test_a_cast_of_floats_that_cupy_would_give_other_integers_is_refused(strict):
    assert strict.asarray([0.0, 2.7, -3.5]).astype("int64").tolist() == [0, 2, -3]
    for values, dtype in (([1.0, float("nan")], "int64"), ([-1.0], "uint32"),
                          ([float("inf")], "int32"), ([300.0], "uint8")):
        with pytest.raises(TypeError, match="CuPy gives other integers"):
            strict.asarray(values).astype(dtype)


def test_a_reduction_gives_a_0d_device_array_not_a_numpy_scalar(strict):
    from minitrans.core.host_syncs import count_host_syncs

    total = strict.ones(3).sum()
    assert isinstance(total, strict.ndarray) and total.ndim == 0
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(total)  # host code cannot take it as a number unnoticed
    with count_host_syncs() as syncs:
        assert float(total) == 3.0
    assert syncs.count == 1


# ---- 9. one thread queues a GPU's work: the optimiser and DataParallel


def test_on_a_device_backend_the_optimiser_updates_whole_parameters_on_one_thread(strict,
                                                                                 tmp_path):
    model = tiny_trainer(tmp_path).model
    adam = Adam(model)
    assert adam.threads == 1
    biggest = max((p for _, p, _ in model.named_parameters()), key=lambda p: p.size)
    adam.BLOCK_BYTES = 64  # would cut every parameter into blocks on the CPU
    assert adam._blocks(biggest, biggest) == [None]


def test_on_numpy_the_optimiser_uses_threads_and_blocks(tmp_path):
    with minitrans.using("numpy"):
        model = tiny_trainer(tmp_path).model
        adam = Adam(model)
        adam.BLOCK_BYTES = 64
        biggest = max((p for _, p, _ in model.named_parameters()), key=lambda p: p.size)
        assert len(adam._blocks(biggest, biggest)) > 1


# ---- 10. attention's softmax decides on the host only where that costs nothing


def test_the_fast_softmax_takes_the_device_path_on_strict_and_reads_nothing_back(strict):
    from minitrans.core.host_syncs import count_host_syncs

    scores = strict.asarray(np.random.default_rng(0).standard_normal((2, 3, 5, 5)) * 40)
    expected = minitrans.to_numpy(softmax.attention_softmax_reference(scores))
    with count_host_syncs() as syncs:
        got = softmax.softmax_in_place(scores.copy())
    assert syncs.count == 0
    np.testing.assert_allclose(minitrans.to_numpy(got), expected, rtol=1e-5, atol=1e-7)
