"""GPT's recipe trained twice, by minitrans and by its PyTorch twin: a small
pre-norm, GELU, learned-position, tied, bias-free DecoderOnlyLM with GPT's
initial weights, and ``to_torch`` of it, fed the same random windows of a
token array, each step clipped at 1.0 and taken by AdamW (decay on the
matrices only) at ``cosine_lr``'s rate: the same loss at every step, to
1e-9 in float64.

Skipped when PyTorch is absent, as the other parity tests.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")

import minitrans  # noqa: E402
from minitrans.interop.torch import (  # noqa: E402
    TokenCrossEntropy, from_torch, gpt_optimizer, gpt_schedule, to_torch)
from minitrans.interop.torch import clip_grad_norm as twin_clip_grad_norm  # noqa: E402
from minitrans.layers.loss import LabelSmoothedCrossEntropy  # noqa: E402
from minitrans.model.config import ModelConfig  # noqa: E402
from minitrans.model.language_model import DecoderOnlyLM  # noqa: E402
from minitrans.training.optimisation.adam import Adam  # noqa: E402
from minitrans.training.optimisation.clipping import clip_grad_norm  # noqa: E402
from minitrans.training.optimisation.schedule import cosine_lr  # noqa: E402

STEPS, BLOCK, BATCH = 20, 16, 4
SCHEDULE = dict(peak=1e-2, min_lr=1e-3, warmup=5, total=STEPS)  # every part within 20 steps
ADAMW = dict(betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)


def gpt_config():
    return ModelConfig(vocab_size=24, d_model=32, h=4, N=2, d_ff=128, dropout=0.0,
                       max_len=BLOCK, pre_norm=True, activation="gelu", positions="learned",
                       tie_embeddings=True, bias=False, output_bias=False,
                       scale_embedding=False, decoder_only=True, pad_id=None, init="gpt")


def windows(seed=0):
    """STEPS batches of (x, y): random windows of a generated token array,
    y the same ids one place further."""
    rng = np.random.default_rng(seed)
    tokens = np.arange(2000) * 5 % 24  # a pattern to learn, with a fifth of it noise
    noise = rng.random(2000) < 0.2
    tokens[noise] = rng.integers(0, 24, size=int(noise.sum()))
    for _ in range(STEPS):
        starts = rng.integers(0, len(tokens) - BLOCK, size=BATCH)
        x = np.stack([tokens[s:s + BLOCK] for s in starts])
        y = np.stack([tokens[s + 1:s + BLOCK + 1] for s in starts])
        yield x, y


def train_both(backend_name, decay="matrices", twin_clip=twin_clip_grad_norm):
    """The losses of each step of minitrans (on ``backend_name``, Adam's
    ``decay``) and of PyTorch (AdamW with gpt_optimizer's two groups, the
    gradients clipped by ``twin_clip``)."""
    ours, theirs = [], []
    with minitrans.using(backend_name, dtype="float64"):
        model = DecoderOnlyLM(gpt_config(), rng=0)
        twin = to_torch(model)
        optimizer = Adam(model, decay=decay, **ADAMW)
        loss = LabelSmoothedCrossEntropy(label_smoothing=0.0)
        twin_optimizer = gpt_optimizer(twin, lr=SCHEDULE["peak"], **ADAMW)
        scheduler = gpt_schedule(twin_optimizer, **SCHEDULE)
        twin_loss = TokenCrossEntropy()
        for step, (x, y) in enumerate(windows(), start=1):
            optimizer.zero_grad()
            ids, targets = (minitrans.core.backend.to_device(a) for a in (x, y))
            ours.append(float(loss.forward(model.forward(ids), targets)))
            model.backward(loss.backward())
            clip_grad_norm(optimizer, 1.0)
            optimizer.step(lr=cosine_lr(step, **SCHEDULE))

            twin_optimizer.zero_grad()
            value = twin_loss(twin(torch.from_numpy(x)), torch.from_numpy(y))
            theirs.append(value.item())
            value.backward()
            assert twin_clip(twin.parameters(), 1.0) > 1.0 or step > 1  # the first is clipped
            twin_optimizer.step()
            scheduler.step()
    return np.array(ours), np.array(theirs)


def worst_relative_difference(ours, theirs):
    return float(np.max(np.abs(ours - theirs) / np.abs(theirs)))


@pytest.mark.parametrize("backend_name", ["numpy", "strict"])
def test_minitrans_and_pytorch_train_gpt_s_recipe_to_the_same_losses(backend_name):
    ours, theirs = train_both(backend_name)
    assert worst_relative_difference(ours, theirs) < 1e-9
    assert ours[-1] < ours[0] - 0.1  # it did learn: the steps were not all nothing


def test_the_comparison_fails_an_adamw_that_decays_biases_and_norms():
    """The plant: minitrans decays the norms' gains and shifts too."""
    ours, theirs = train_both("numpy", decay="all")
    assert worst_relative_difference(ours, theirs) > 1e-7


def test_pytorch_s_own_clipping_differs_by_its_1e_6_in_the_norm():
    """``torch.nn.utils.clip_grad_norm_`` divides by norm + 1e-6: losses
    apart by more than 1e-9 (hence the twin's ``clip_grad_norm``), but by
    less than 1e-6: the same training otherwise."""
    ours, theirs = train_both("numpy", twin_clip=torch.nn.utils.clip_grad_norm_)
    assert 1e-9 < worst_relative_difference(ours, theirs) < 1e-6


def test_gpt_optimizer_decays_exactly_the_matrices():
    twin = to_torch(DecoderOnlyLM(gpt_config(), rng=0))
    decayed, undecayed = gpt_optimizer(twin, lr=1e-3).param_groups
    assert decayed["weight_decay"] == 0.1 and undecayed["weight_decay"] == 0.0
    assert decayed["params"] and all(p.dim() >= 2 for p in decayed["params"])
    assert undecayed["params"] and all(p.dim() == 1 for p in undecayed["params"])
    count = len(list(twin.parameters()))  # the tied table once
    assert len(decayed["params"]) + len(undecayed["params"]) == count


def test_gpt_schedule_gives_cosine_lr_at_every_step():
    twin = to_torch(DecoderOnlyLM(gpt_config(), rng=0))
    optimizer = gpt_optimizer(twin, lr=123.0)
    scheduler = gpt_schedule(optimizer, **SCHEDULE)
    for step in range(1, STEPS + 3):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(
            cosine_lr(step, **SCHEDULE), rel=1e-15), step
        optimizer.step()
        scheduler.step()


def test_the_gpt_model_goes_to_pytorch_and_back_unchanged():
    """Learned positions, no biases, a tied table: every weight has its tensor."""
    with minitrans.using("numpy", dtype="float64"):
        model = DecoderOnlyLM(gpt_config(), rng=0)
        back = from_torch(to_torch(model))
        for (name, ours, _), (_, theirs, _) in zip(model.named_parameters(),
                                                    back.named_parameters()):
            assert np.array_equal(ours, theirs), name
        assert back.config == model.config
