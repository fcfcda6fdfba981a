"""The library tests' helpers: a gradient check that fails with the whole
table, an error message that names what it should, and a pretrained
file's one-line refusal (import them with ``from tests.library.conftest
import ...``)."""

import re

import pytest

from minitrans.gradcheck import check_layer, format_table
from minitrans.files.rules import PretrainedError


def assert_gradcheck(layer, *inputs, **options):
    """Gradient-check a layer and fail with the whole table when any tensor fails."""
    results = check_layer(layer, *inputs, **options)
    assert results, "the checker checked nothing"
    assert all(r.passed for r in results), "\n" + format_table(results)
    return results


def assert_names(info, *names):
    """The error message names every one of ``names`` as a whole word."""
    message = str(info.value)
    for name in names:
        assert re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message), (name, message)


def pretrained_refusal(call, path, *parts):
    """``call()`` raises a one-line PretrainedError that starts with ``path``
    and contains each of ``parts``; returns its message."""
    with pytest.raises(PretrainedError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    for part in parts:
        assert part in message, (part, message)
    return message
