"""The library tests' helpers: a gradient check that fails with the whole
table, and an error message that names what it should (import them with
``from tests.library.conftest import ...``)."""

import re

from minitrans.gradcheck import check_layer, format_table


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
