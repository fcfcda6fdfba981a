"""Kernel launches, counted on the CPU.

On a GPU every array operation is a kernel launch that costs the CPU some
microseconds whatever the array's size, so a step of a small model is bound
by how many it issues. The strict backend records each operation that would
launch one (``minitrans.core.launches``); these tests check its rules and
hold a ``tiny`` training step and a decoded token to a budget.
"""

import collections
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import minitrans
from minitrans.core import backend
from minitrans.core.launches import count_launches, one_launch
from minitrans.decoding import search
from minitrans.training import experiment
from minitrans.training.train_config import TrainConfig

# benchmarks/harness/configs.py "tiny" (on the copy task: 14 ids, 22 tokens a row)
TINY = dict(d_model=64, h=4, N=2, d_ff=256, dropout=0.1)
TINY_BATCH = 64

# The launches of the unfused code (before the fused device kernels), one
# worker: a training step of TINY, and a token greedy-decoded with the cache.
UNFUSED_STEP, UNFUSED_TOKEN = 1467, 187
# The count may not grow: a new launch in the step must be a choice, made here.
STEP_CEILING, TOKEN_CEILING = int(UNFUSED_STEP * 1.02), int(UNFUSED_TOKEN * 1.02)
# The goal: at most a quarter of the unfused launches.
STEP_BUDGET, TOKEN_BUDGET = UNFUSED_STEP // 4, UNFUSED_TOKEN // 4
# Kernels written once, as element-wise bodies that cupy.fuse compiles (and
# NumPy runs), hold at most one reduction each, and a matrix product is a
# cuBLAS call of its own. So a decoded token needs at least its products,
# three kernels for each layer norm and each softmax (the two reductions,
# then the element-wise step that reads both), and two reductions to choose
# the token and ask whether every row has finished: for the tiny model 25 +
# 3 x 6 + 3 x 4 + 2 = 57, above the budget of 46 (``test_the_token_budget_is_
# below_what_fused_kernels_can_reach`` counts it). Fewer would take kernels
# that reduce a row and transform it in one launch (hand-written CUDA, not
# one body for both NumPy and a GPU), or a CUDA graph of the whole token,
# which CuPy refuses while cuBLAS runs (cupy/cupy#6290).
TOKEN_BELOW_FLOOR = ("the budget is below what kernels written once as fused element-wise "
                     "bodies can reach: see TOKEN_BUDGET's comment")


@pytest.fixture
def strict():
    with minitrans.using("strict", dtype="float32"):
        yield backend.get_xp()


def count_of(action):
    """The launches of ``action()``."""
    with count_launches() as launches:
        action()
    return launches


def check_budget(launches, budget):
    """Fails, listing what launched, when ``launches`` is over ``budget``."""
    assert launches.count <= budget, (
        f"{launches.count} launches, over the budget of {budget}:\n{launches.summary()}")


# -- the rules --------------------------------------------------------------

def test_an_operation_on_the_device_is_one_launch_and_a_view_none(strict):
    x = strict.ones((4, 6))
    ids = strict.asarray(np.array([0, 2]))
    launching = {"multiply": lambda: x * 2.0, "matmul": lambda: x @ x.T, "sum": x.sum,
                 "max": lambda: strict.max(x, axis=0), "add.at": lambda: strict.add.at(x, ids, 1),
                 "gather": lambda: x[ids], "setitem": lambda: x.__setitem__(0, 1.0),
                 "zeros": lambda: strict.zeros(3), "copy": x.copy, "fill": lambda: x.fill(0.0),
                 "astype": lambda: x.astype("int32"), "random.random": lambda: rng.random(2),
                 "transfer (asarray)": lambda: strict.asarray(np.ones(3)),
                 "copy (reshape)": lambda: x.T.reshape(24)}
    rng = strict.random.default_rng(0)
    for kind, action in launching.items():
        assert count_of(action).places == [kind]
    views = [lambda: x.reshape(6, 4), lambda: x.T, lambda: x[1:3, ::2], lambda: x[0, 0],
             lambda: strict.swapaxes(x, 0, 1), lambda: strict.expand_dims(x, 0),
             lambda: strict.broadcast_to(x, (2, 4, 6)), lambda: strict.asarray(x),
             lambda: strict.empty(3), lambda: x.shape, lambda: strict.ravel(x)]
    assert [count_of(action).count for action in views] == [0] * len(views)


def test_a_fused_kernel_counts_once_however_many_operations_inside(strict):
    x = strict.ones(5)

    def fused():
        with one_launch("norm"):
            y = (x - x.mean()) * 2.0
            with one_launch("inner"):  # nested: still the one kernel
                y = y + 1.0
            return y.sum()

    assert count_of(fused).places == ["fused norm"]
    assert count_of(lambda: (fused(), x + 1.0)).places == ["fused norm", "add"]


def test_launches_on_every_thread_add_up_and_none_outside_the_block(strict):
    x = strict.ones(3)
    with count_launches() as outer:
        x + 1.0
        with count_launches() as inner:
            with ThreadPoolExecutor(2) as pool:  # as DataParallel's workers
                list(pool.map(lambda _: x * 2.0, range(4)))
    after = x * 3.0
    assert (outer.count, inner.count) == (5, 4) and after.shape == (3,)


def test_the_budget_check_fails_on_one_launch_too_many(strict):
    x = strict.ones(3)
    check_budget(count_of(lambda: x + 1.0), budget=1)
    with pytest.raises(AssertionError, match="2 launches, over the budget of 1"):
        check_budget(count_of(lambda: (x + 1.0) * 2.0), budget=1)  # a planted extra launch


# -- a training step and a decoded token --------------------------------------

def tiny_step_launches(out_dir):
    """The launches of one training step (not the first, which makes the
    optimiser's state) of the tiny config, as the Trainer runs it, one worker."""
    config = TrainConfig(task="copy", steps=6, batch_size=TINY_BATCH, warmup=4, eval_every=3,
                         eval_pairs=20, target_exact_match=1.1, workers=1, out_dir=str(out_dir))
    trainer = experiment.new_trainer(config, TINY, progress=False, log=lambda message: None)
    trainer.train_step()
    return count_of(trainer.train_step), trainer.model


def token_launches(model, tokens=8):
    """The launches of one more greedy-decoded token (with the cache), one
    worker: every row is decoded to the full length (no token ends a row)."""
    src = minitrans.to_device(np.random.default_rng(0).integers(4, 14, size=(4, 9)))
    model.eval()

    def decode(length):
        return count_of(lambda: search.greedy(model, src, length, eos_id=-1, workers=1))

    shorter, longer = decode(tokens), decode(tokens + 1)
    return longer.count - shorter.count, longer, kinds_of_one_token(shorter, longer)


def kinds_of_one_token(shorter, longer):
    """{kind: launches} of the one token that ``longer`` decoded more."""
    return collections.Counter(longer.places) - collections.Counter(shorter.places)


@pytest.fixture(scope="module")
def counted(tmp_path_factory):
    """(the step's launches, one decoded token's count, the decoding's
    launches, and the token's launches by kind)."""
    with minitrans.using("strict", dtype="float32"):
        step, model = tiny_step_launches(tmp_path_factory.mktemp("tiny"))
        return step, *token_launches(model)


def test_a_training_step_launches_no_more_than_it_did(counted):
    check_budget(counted[0], STEP_CEILING)


def test_a_decoded_token_launches_no_more_than_it_did(counted):
    per_token, decoding = counted[1], counted[2]
    assert per_token <= TOKEN_CEILING, f"{per_token} launches a token:\n{decoding.summary()}"


def test_a_training_step_launches_a_quarter_of_the_unfused_count(counted):
    check_budget(counted[0], STEP_BUDGET)


@pytest.mark.xfail(strict=True, reason=TOKEN_BELOW_FLOOR)
def test_a_decoded_token_launches_a_quarter_of_the_unfused_count(counted):
    per_token, decoding = counted[1], counted[2]
    assert per_token <= TOKEN_BUDGET, f"{per_token} launches a token:\n{decoding.summary()}"


def least_launches_of_a_token(kinds):
    """The fewest launches fused kernels can decode a token in: its matrix
    products, three for each layer norm and softmax, two to choose and stop."""
    norms, softmaxes = kinds["fused layer_norm_scale_shift"], kinds["fused softmax_normalise"]
    return kinds["matmul"] + 3 * norms + 3 * softmaxes + 2


def test_the_token_budget_is_below_what_fused_kernels_can_reach(counted):
    per_token, kinds = counted[1], counted[3]
    least = least_launches_of_a_token(kinds)
    assert (kinds["matmul"], least) == (25, 57)  # the floor of TOKEN_BUDGET's comment
    assert TOKEN_BUDGET < least <= per_token


def test_the_floor_counts_what_a_token_launches():
    tiny_token = collections.Counter({"matmul": 25, "fused layer_norm_scale_shift": 6,
                                      "fused softmax_normalise": 4, "add": 7})
    assert least_launches_of_a_token(tiny_token) == 57
    del tiny_token["fused softmax_normalise"]  # a model without attention would fit the budget
    assert least_launches_of_a_token(tiny_token) == 45 <= TOKEN_BUDGET
