"""Helpers shared by the tests (import with ``from helpers import ...``)."""

import importlib.util
import re
import warnings
from contextlib import contextmanager

from minitrans.tools.gradcheck import check_layer, format_table


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


@contextmanager
def warnings_as_errors():
    """Every warning inside the block is an error, but one that OpenBLAS can
    raise for nothing.

    Some of OpenBLAS's kernels leave the processor's invalid-operation flag
    set after a product of finite numbers, and NumPy, which reads that flag
    after every ufunc, then warns "invalid value encountered in matmul" (the
    symptom of numpy/numpy#24067 and OpenMathLib/OpenBLAS#1924). Our CI met
    it once, in a layer norm's mean of five float32 numbers near 1e-4, and
    we could not make it happen again on purpose. Ignoring that one message
    loses nothing: a real invalid operation in a product (inf * 0, inf - inf)
    leaves a NaN in the result, which every test using this block checks
    for, and an overflow in a
    product is still an error (``tests/test_helpers.py`` shows both).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(
            "ignore", message="invalid value encountered in matmul", category=RuntimeWarning
        )
        yield


def load_module(path, name):
    """The Python file at ``path`` imported as a module called ``name``: the
    lessons' builder and solutions are scripts, not part of the package."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY_SIZES = {"d_model": 16, "h": 2, "N": 1, "d_ff": 32, "dropout": 0.1}


def tiny_trainer(out_dir, task="copy", log=lambda message: None, **settings):
    """A trainer of a tiny model writing into ``out_dir``: 6 steps, an
    evaluation every 3 on 20 held-out pairs, never stopping early unless
    ``settings`` (TrainConfig fields) ask."""
    from minitrans.training import experiment
    from minitrans.training.trainer import TrainConfig

    values = dict(steps=6, batch_size=16, warmup=4, eval_every=3, eval_pairs=20,
                  target_exact_match=1.1, out_dir=str(out_dir))
    config = TrainConfig(task=task, **{**values, **settings})
    return experiment.new_trainer(config, TINY_SIZES, progress=False, log=log)


def assert_fails_in_case(checker, wrong, case):
    """An exercise checker fails the wrong answer on seeds 0, 1 and 2, naming
    ``case`` as the case that shows the mistake, with a hint."""
    for seed in (0, 1, 2):
        result = checker(wrong, quiet=True, seed=seed)
        assert not result.passed and result.case.startswith(f"case '{case}' ("), result.message
        assert result.message.startswith(f"not yet: {result.case}: "), result.message
        assert "Hint: " in result.message
