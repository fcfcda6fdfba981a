"""Lesson 19's exercise: the parameter count of a
decoder-only model. Its checker passes the solution, fails the mistakes a
learner is likely to make in the case that shows them, and its reference (a
list of tensor shapes) agrees with the models minitrans builds and with the
published sizes of GPT-2."""

import pathlib

import numpy as np
import pytest

import minitrans
from minitrans_course import exercises_gpt
from minitrans_course.exercises import CHECKERS
from tests.course.conftest import assert_fails_in_case
from tests.conftest import load_module

SOLUTION = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "solutions" / "19_to_gpt2.py"
count = load_module(SOLUTION, "solutions_19_to_gpt2").decoder_only_parameter_count
check = exercises_gpt.check_decoder_only_parameter_count


def test_the_checker_is_registered():
    assert CHECKERS["decoder_only_parameter_count"] is check


def _with_key_bias(V, d, h, N, d_ff, max_len, tied, learned):
    return count(V, d, h, N, d_ff, max_len, tied, learned) + N * d  # GPT-2's checkpoint has one


def _no_final_norm(V, d, h, N, d_ff, max_len, tied, learned):
    return count(V, d, h, N, d_ff, max_len, tied, learned) - 2 * d


def _output_matrix_always(V, d, h, N, d_ff, max_len, tied, learned):
    return count(V, d, h, N, d_ff, max_len, False, learned)  # counts a tied matrix twice


def _positions_always(V, d, h, N, d_ff, max_len, tied, learned):
    return count(V, d, h, N, d_ff, max_len, tied, True)  # a fixed table is no parameter


def _per_head_projections(V, d, h, N, d_ff, max_len, tied, learned):
    return count(V, d, h, N, d_ff, max_len, tied, learned) + N * 4 * d * d * (h - 1)


def _float32(*args):
    """Exact below 2**24, rounded above: GPT-2 small has 124 million. The old
    comparison passed it: NumPy rounds the expected int to float32 before ==."""
    return np.float32(count(*args))


WRONG = [
    (_with_key_bias, "random, tied, learned positions"),
    (_no_final_norm, "random, tied, learned positions"),
    (_output_matrix_always, "random, tied, learned positions"),
    (_positions_always, "random, sinusoidal positions"),
    (_per_head_projections, "random, tied, learned positions"),
    (_float32, "GPT-2 small"),
]


@pytest.mark.parametrize("wrong, case", WRONG, ids=[w.__name__ for w, _ in WRONG])
def test_a_typical_mistake_fails_in_its_case(wrong, case):
    assert_fails_in_case(check, wrong, case)


def test_the_published_gpt2_sizes_follow_from_the_reference():
    """GPT-2's released checkpoints hold 124,439,808 (small) ... 1,557,611,200
    (XL) parameters: a key bias per layer that minitrans does not have, and no
    output bias, which minitrans has."""
    published = {
        "small": 124_439_808,
        "medium": 354_823_168,
        "large": 774_030_080,
        "xl": 1_557_611_200,
    }
    V, context = exercises_gpt.GPT2_VOCAB, exercises_gpt.GPT2_CONTEXT
    for name, (d, h, N) in exercises_gpt.GPT2_SIZES.items():
        ours = exercises_gpt.parameter_count_by_shapes(V, d, h, N, 4 * d, context, True, True)
        assert ours + N * d - V == published[name], name


def _built(V, d, h, N, d_ff, max_len, tied, learned):
    options = {"positions": "learned"} if learned else {}
    config = minitrans.ModelConfig(
        vocab_size=V,
        d_model=d,
        h=h,
        N=N,
        d_ff=d_ff,
        max_len=max_len,
        dropout=0.0,
        pre_norm=True,
        tie_embeddings=tied,
        decoder_only=True,
        **options,
    )
    return config, minitrans.DecoderOnlyLM(config, rng=0)


def _learned_positions_available():
    return "positions" in {f.name for f in minitrans.ModelConfig.__dataclass_fields__.values()}


@pytest.mark.parametrize("learned", [False, True])
@pytest.mark.parametrize("tied", [False, True])
def test_the_reference_lists_the_built_models_parameters(tied, learned):
    """Names and shapes, tensor by tensor, and the total of ModelConfig.parameter_count."""
    if learned and not _learned_positions_available():
        pytest.skip("ModelConfig has no positions option yet")
    rng = np.random.default_rng(3)
    for _ in range(3):
        h = int(rng.integers(1, 4))
        sizes = (
            int(rng.integers(5, 40)),
            h * int(rng.integers(1, 5)),
            h,
            int(rng.integers(1, 3)),
            int(rng.integers(1, 20)),
            int(rng.integers(2, 12)),
        )
        config, model = _built(*sizes, tied, learned)
        built = {name: tuple(value.shape) for name, value, _ in model.named_parameters()}
        listed = dict(exercises_gpt.parameter_shapes(*sizes, tied, learned))
        assert built == listed
        total = exercises_gpt.parameter_count_by_shapes(*sizes, tied, learned)
        assert total == model.num_parameters() == config.parameter_count()
