"""The validators of minitrans.core.checks: what each accepts, what it
refuses, and the words of its message ("NAME: expected WHAT, got VALUE").

The catalogue in test_bad_inputs.py shows them at work inside the package;
here each is tried on its own, on the values that slip past a careless
check: a bool for an int, NaN or infinity for a number, None, a string."""

import math
import re

import numpy as np
import pytest

import minitrans
from minitrans.core import backend, checks

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("value, bounds", [
    (3, {}), (0, {"low": 0}), (1, {"low": 1}), (5, {"low": 1, "high": 5}),
    (np.int64(7), {"low": 1}), (-2, {"high": 0}), (None, {"low": 1, "allow_none": True}),
])
def test_check_int_accepts(value, bounds):
    checks.check_int("n", value, **bounds)


@pytest.mark.parametrize("value, bounds, message", [
    (True, {"low": 1}, "n: expected a positive integer, got True"),
    (False, {"low": 0}, "n: expected a non-negative integer, got False"),
    (None, {"low": 1}, "n: expected a positive integer, got None"),
    (2.0, {"low": 1}, "n: expected a positive integer, got 2.0"),
    ("3", {}, "n: expected an integer, got '3'"),
    (NAN, {}, "n: expected an integer, got nan"),
    (0, {"low": 1, "allow_none": True}, "n: expected a positive integer or None, got 0"),
    (6, {"low": 1, "high": 5}, "n: expected an integer in [1, 5], got 6"),
    (-3, {"low": -2}, "n: expected an integer >= -2, got -3"),
    (1, {"high": 0}, "n: expected an integer <= 0, got 1"),
])
def test_check_int_refuses(value, bounds, message):
    with pytest.raises(ValueError) as info:
        checks.check_int("n", value, **bounds)
    assert str(info.value) == message


@pytest.mark.parametrize("value, bounds", [
    (0.5, {}), (0, {"low": 0}), (1, {"low": 0, "high": 1}), (np.float32(0.25), {"low": 0}),
    (INF, {"low": 0, "finite": False}), (-INF, {"high": 0, "finite": False}),
    (1e-9, {"low": 0, "low_open": True}),
    (None, {"allow_none": True}),
])
def test_check_number_accepts(value, bounds):
    checks.check_number("x", value, **bounds)


@pytest.mark.parametrize("value, bounds, message", [
    (True, {}, "x: expected a finite number, got True"),
    (NAN, {"finite": False}, "x: expected a number, got nan"),
    (NAN, {"low": 0, "high": 1, "high_open": True}, "x: expected a number in [0, 1), got nan"),
    (INF, {"low": 0}, "x: expected a finite number >= 0, got inf"),
    (0, {"low": 0, "low_open": True}, "x: expected a finite positive number, got 0"),
    (1.0, {"low": 0, "high": 1, "high_open": True}, "x: expected a number in [0, 1), got 1.0"),
    (0.0, {"low": 0, "high": 1, "low_open": True}, "x: expected a number in (0, 1], got 0.0"),
    (2, {"low": 1, "low_open": True, "high": 2, "high_open": True},
     "x: expected a number in (1, 2), got 2"),
    ("0.1", {"low": 0}, "x: expected a finite number >= 0, got '0.1'"),
    (None, {"low": 0}, "x: expected a finite number >= 0, got None"),
    (3, {"high": 2.5}, "x: expected a finite number <= 2.5, got 3"),
    (-1.0, {"low": 0, "allow_none": True}, "x: expected a finite number >= 0 or None, got -1.0"),
])
def test_check_number_refuses(value, bounds, message):
    with pytest.raises(ValueError) as info:
        checks.check_number("x", value, **bounds)
    assert str(info.value) == message


def test_the_shorthands_say_what_they_check():
    with pytest.raises(ValueError, match=r"^d_model: expected a positive integer, got 0$"):
        checks.check_positive_int("d_model", 0)
    with pytest.raises(ValueError, match=r"^p: expected a number in \[0, 1\), got 1$"):
        checks.check_probability("p", 1)
    checks.check_probability("p", 0.0)


def test_check_choice():
    checks.check_choice("level", "char", ("char", "word"))
    with pytest.raises(ValueError) as info:
        checks.check_choice("level", "byte", ("char", "word"))
    assert str(info.value) == "level: expected one of ('char', 'word'), got 'byte'"
    with pytest.raises(ValueError, match=r"^level: expected one of \('char'\), got None$"):
        checks.check_choice("level", None, ["char"])


def test_the_predicates_and_the_words_agree_with_the_checks():
    assert checks.is_int(3, low=1) and not checks.is_int(True) and not checks.is_int(1.0)
    assert checks.is_number(0.5, low=0, high=1) and not checks.is_number(NAN)
    assert not checks.is_number(INF) and checks.is_number(INF, finite=False)
    assert checks.describe_int(low=0) == "a non-negative integer"
    assert checks.describe_int(low=2, allow_none=True) == "an integer >= 2 or None"
    assert checks.describe_number(low=0, low_open=True) == "a finite positive number"
    assert checks.describe_number(low=0, high=1, high_open=True) == "a number in [0, 1)"


def ids(rows, dtype=np.int64):
    return backend.to_device(np.array(rows, dtype=dtype))


def test_check_token_ids_accepts(backend_name):
    checks.check_token_ids("ids", ids([[0, 4], [3, 1]]), vocab_size=5, ndim=2, nonempty=True,
                           max_len=2)
    checks.check_token_ids("ids", ids([7, 9]))  # no vocabulary given: any integers
    checks.check_token_ids("ids", ids(np.zeros((0, 3))), vocab_size=5)  # empty: allowed by default


@pytest.mark.parametrize("make, options, error, message", [
    (lambda: ids([[0, 5]]), {"vocab_size": 5}, ValueError,
     "ids: expected token ids in [0, 5), got 5"),
    (lambda: ids([[-1, 0]]), {"vocab_size": 5}, ValueError,
     "ids: expected token ids in [0, 5), got -1"),
    (lambda: ids([[0.0, 1.0]], dtype=np.float32), {}, TypeError,
     "ids: expected an integer array of token ids, got dtype float32"),
    (lambda: ids([True, False], dtype=bool), {}, TypeError,
     "ids: expected an integer array of token ids, got dtype bool"),
    (lambda: ids([1, 2]), {"ndim": 2}, ValueError,
     "ids: expected an array of rank 2, got shape (2,)"),
    (lambda: ids(np.zeros((2, 0))), {"nonempty": True}, ValueError,
     "ids: expected at least one sequence of at least one token, got shape (2, 0)"),
    (lambda: ids([[1, 2, 3]]), {"max_len": 2}, ValueError,
     "ids: expected sequences of at most max_len=2 tokens, got shape (1, 3)"),
])
def test_check_token_ids_refuses(backend_name, make, options, error, message):
    with pytest.raises(error) as info:
        checks.check_token_ids("ids", make(), **options)
    assert str(info.value) == message


def test_check_token_ids_refuses_a_list():
    with pytest.raises(TypeError, match=r"^ids: expected an array of the current backend"):
        checks.check_token_ids("ids", [[1, 2]])


def test_a_config_of_numpy_integers_holds_python_numbers_and_saves_as_json():
    import dataclasses
    import json

    import numpy as np

    from minitrans.model.config import ModelConfig

    config = ModelConfig(vocab_size=np.int64(11), d_model=np.int32(8), h=np.int64(2),
                         N=np.int64(1), d_ff=np.int64(16), dropout=np.float32(0.25))
    assert type(config.vocab_size) is int and type(config.d_model) is int
    assert type(config.dropout) is float
    assert json.loads(json.dumps(dataclasses.asdict(config)))["vocab_size"] == 11


@pytest.mark.parametrize("make, argument", [
    (lambda model: minitrans.Adam(model, lr=float("inf")), "lr"),
    (lambda model: minitrans.Adam(model, lr=1e-3, eps=float("nan")), "eps"),
    (lambda model: minitrans.Adam(model, lr=1e-3, weight_decay=float("nan")), "weight_decay"),
    (lambda model: minitrans.Adam(model, lr=1e-3, betas=(0.9, True)), "betas[1]"),
    (lambda model: minitrans.SGD(model, lr=0.1, momentum=float("nan")), "momentum"),
    (lambda model: minitrans.SGD(model, lr=0.1, threads=True), "threads"),
])
def test_optimisers_refuse_hyperparameters_that_would_make_nan_weights(make, argument):
    model = minitrans.Linear(3, 2, rng=0)
    with pytest.raises(ValueError, match=rf"^{re.escape(argument)}: expected"):
        make(model)


def test_inputs_checked_skips_the_finite_check_inside_and_only_there():
    import threading

    bad = backend.from_host(np.array([1.0, np.nan], dtype=np.float32))
    with checks.inputs_checked():
        checks.check_finite("x", bad)  # a parent layer checked what this was made from
        seen_in_another_thread = []

        def other():
            try:
                checks.check_finite("x", bad)
            except checks.NonFiniteError:
                seen_in_another_thread.append(True)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen_in_another_thread == [True]  # the block belongs to its own thread
    with pytest.raises(checks.NonFiniteError, match="x: expected finite numbers, got 1 NaN"):
        checks.check_finite("x", bad)


def test_multi_head_attention_still_reports_a_nan_in_its_input():
    layer = minitrans.MultiHeadAttention(8, 2, rng=0)
    x = np.zeros((1, 3, 8), dtype=np.float32)
    x[0, 1, 2] = np.nan
    with pytest.raises(checks.NonFiniteError, match="^x: expected finite"):
        layer.forward(backend.from_host(x))
