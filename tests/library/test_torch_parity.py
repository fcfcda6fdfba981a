"""minitrans against PyTorch autograd, in float64: the same logits, loss and
gradients for whole models and for each layer, and the same Adam steps.

Skipped when PyTorch is absent (the README's test command installs the CPU
build, so CI runs them). Tolerance: relative error below 1e-6, as for the
gradient checker; float64 agreement is in fact about 1e-13.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="PyTorch is not installed: pip install \".[torch]\"")

import minitrans  # noqa: E402
from minitrans.core import backend  # noqa: E402
from minitrans.interop.torch import (  # noqa: E402
    from_torch,
    key_bias_blocks,
    paper_loss,
    paper_optimizer,
    parameter_links,
    to_torch,
)
from minitrans.layers.embedding import Embedding  # noqa: E402
from minitrans.layers.layernorm import LayerNorm  # noqa: E402
from minitrans.layers.loss import LabelSmoothedCrossEntropy  # noqa: E402
from minitrans.layers.multihead import MultiHeadAttention  # noqa: E402
from minitrans.layers.positional import sinusoidal_table  # noqa: E402
from minitrans.model.config import ModelConfig  # noqa: E402
from minitrans.model.language_model import DecoderOnlyLM  # noqa: E402
from minitrans.model.transformer import Transformer  # noqa: E402
from minitrans.ops.masks import padding_mask  # noqa: E402
from minitrans.gradcheck import relative_error  # noqa: E402
from minitrans.training.optimisation.adam import Adam  # noqa: E402
from minitrans.training.optimisation.schedule import transformer_lr  # noqa: E402

TOLERANCE = 1e-6
VOCAB, PAD = 13, 0


@pytest.fixture(autouse=True)
def torch_float64():
    """PyTorch layers built in a test start in float64 (then back to the default)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def tiny_config(**options):
    sizes = dict(vocab_size=VOCAB, d_model=16, h=4, N=2, d_ff=24, dropout=0.0, max_len=12)
    return ModelConfig(**{**sizes, **options})


def ids(rng, batch, length, pad_from):
    """Random non-pad ids, row i padded from position pad_from[i] on."""
    out = rng.integers(1, VOCAB, size=(batch, length))
    for row, start in enumerate(pad_from):
        out[row, start:] = PAD
    return out


def t(array):
    """A host copy of a minitrans array as a torch tensor."""
    return torch.from_numpy(np.array(backend.to_numpy(array)))


def close(ours, theirs, tolerance=TOLERANCE):
    ours = backend.to_numpy(ours)
    theirs = (
        theirs.detach().cpu().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    )
    error = relative_error(ours, theirs)
    assert error < tolerance, f"relative error {error:.2e}"
    return error


def assert_gradients_match(model, torch_model):
    """Every minitrans parameter's gradient equals autograd's, and the links
    cover every parameter of both models."""
    links = parameter_links(model, torch_model)
    assert [link.name for link in links] == [name for name, _, _ in model.named_parameters()]
    linked = sum(
        link.tensor[link.rows].numel() if link.rows else link.tensor.numel() for link in links
    )
    key_biases = sum(bias[rows].numel() for _, bias, rows in key_bias_blocks(torch_model))
    assert linked + key_biases == sum(p.numel() for p in torch_model.parameters())
    # A gradient that is zero in exact arithmetic (W_Q and W_K where every
    # row has one key to attend to: softmax then outputs 1 whatever the
    # scores) is rounding noise on both sides; errors are measured against
    # at least 1e-9 of the model's largest gradient so noise is not compared with noise.
    scale = max(float(link.torch_grad().abs().max()) for link in links)
    failures = {}
    for link in links:
        ours, theirs = backend.to_numpy(link.grad), link.torch_grad().numpy()
        error = np.abs(ours - theirs).max() / max(
            np.abs(ours).max(), np.abs(theirs).max(), 1e-9 * scale
        )
        if not error < TOLERANCE:
            failures[link.name] = error
    assert not failures, failures
    # PyTorch's key bias, which minitrans leaves out: its gradient is zero
    # up to rounding, because softmax ignores what it adds to a row
    for _, bias, rows in key_bias_blocks(torch_model):
        assert float(bias.grad[rows].abs().max()) < 1e-12 * scale


def run_both(model, torch_model, inputs, targets, smoothing=0.1):
    """Forward, label-smoothed loss and backward in both libraries, on host
    id arrays; checks logits and loss, leaves the gradients in place."""
    xp = backend.get_xp()
    logits = model.forward(*map(xp.asarray, inputs))
    torch_logits = torch_model(*map(torch.from_numpy, inputs))
    close(logits, torch_logits)
    loss_fn = LabelSmoothedCrossEntropy(smoothing, pad_id=PAD)
    loss = loss_fn.forward(logits, xp.asarray(targets))
    torch_loss = paper_loss(model.config, smoothing)(torch_logits, torch.from_numpy(targets))
    close(loss, torch_loss)
    model.backward(loss_fn.backward())
    torch_loss.backward()


# ------------------------------------------------------------ whole models


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_encoder_decoder_logits_loss_and_every_gradient_match_autograd(float64, pre_norm, tie):
    rng = np.random.default_rng(0)
    model = Transformer(tiny_config(pre_norm=pre_norm, tie_embeddings=tie), rng=1)
    torch_model = to_torch(model)
    src, tgt = ids(rng, 3, 9, [9, 6, 2]), ids(rng, 3, 8, [8, 8, 3])
    run_both(model, torch_model, (src, tgt[:, :-1]), tgt[:, 1:])
    assert_gradients_match(model, torch_model)


@pytest.mark.parametrize("pre_norm", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_decoder_only_logits_loss_and_every_gradient_match_autograd(float64, pre_norm, tie):
    rng = np.random.default_rng(1)
    model = DecoderOnlyLM(
        tiny_config(pre_norm=pre_norm, tie_embeddings=tie, decoder_only=True), rng=2
    )
    torch_model = to_torch(model)
    tokens = ids(rng, 4, 10, [10, 7, 4, 9])
    run_both(model, torch_model, (tokens[:, :-1],), tokens[:, 1:])
    assert_gradients_match(model, torch_model)


def test_the_gradient_comparison_fails_on_a_wrong_backward(float64):
    """The parity check is not vacuous: halve one layer's weight gradient
    and it names that parameter."""
    rng = np.random.default_rng(2)
    model = Transformer(tiny_config(), rng=3)
    torch_model = to_torch(model)
    src, tgt = ids(rng, 2, 6, [6, 4]), ids(rng, 2, 6, [6, 5])
    run_both(model, torch_model, (src, tgt[:, :-1]), tgt[:, 1:])
    assert_gradients_match(model, torch_model)  # right first
    model.decoder.layers[0].feed_forward.W_2.grads["W"] *= 0.5
    with pytest.raises(AssertionError, match=r"decoder\.layers\.0\.feed_forward\.W_2\.W"):
        assert_gradients_match(model, torch_model)


@st.composite
def random_models(draw):
    """Any head count, depth, norm placement, tying and kind of model, with
    rows padded anywhere after their first token."""
    h = draw(st.sampled_from([1, 2, 4]))
    config = tiny_config(d_model=h * draw(st.integers(2, 4)), h=h, N=draw(st.integers(1, 3)),
                         pre_norm=draw(st.booleans()), tie_embeddings=draw(st.booleans()),
                         decoder_only=draw(st.booleans()))
    batch = draw(st.integers(1, 4))
    lengths = draw(st.integers(2, 9)), draw(st.integers(2, 9))
    # every row keeps a real token; targets keep one too (tgt_out = tgt[:, 1:]), since
    # on all-padding targets PyTorch's mean is 0/0 = NaN where minitrans's loss is 0
    pad_from = [draw(st.lists(st.integers(first, n), min_size=batch, max_size=batch))
                for first, n in zip((1, 2), lengths)]
    return config, batch, lengths, pad_from, draw(st.integers(0, 2**16))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=random_models())
def test_random_models_match_autograd(case):
    config, batch, (length_src, length_tgt), (pad_src, pad_tgt), seed = case
    rng = np.random.default_rng(seed)
    with minitrans.using("numpy", dtype="float64"):
        model = (DecoderOnlyLM if config.decoder_only else Transformer)(config, rng=seed)
        torch_model = to_torch(model)
        tgt = ids(rng, batch, length_tgt, pad_tgt)
        inputs = (
            (tgt[:, :-1],)
            if config.decoder_only
            else (ids(rng, batch, length_src, pad_src), tgt[:, :-1])
        )
        run_both(model, torch_model, inputs, tgt[:, 1:])
        assert_gradients_match(model, torch_model)


# ------------------------------------------------------------ weight exchange


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_weights_go_to_torch_and_back_unchanged(backend_name, dtype):
    with minitrans.using(dtype=dtype):
        model = Transformer(tiny_config(tie_embeddings=True), rng=4)
        torch_model = to_torch(model)
        assert {p.dtype for p in torch_model.parameters()} == {getattr(torch, dtype)}
        back = from_torch(torch_model)
        for (name, ours, _), (_, theirs, _) in zip(
            model.named_parameters(), back.named_parameters()
        ):
            assert theirs.dtype == ours.dtype, name
            assert np.array_equal(backend.to_numpy(ours), backend.to_numpy(theirs)), name


def test_to_torch_zeroes_the_key_bias_and_from_torch_may_ignore_it(float64):
    """A key bias adds one constant to each row of scores; a PyTorch model
    whose b_K has learnt something still gives minitrans's logits."""
    rng = np.random.default_rng(5)
    model = Transformer(tiny_config(), rng=6)
    torch_model = to_torch(model)
    assert all(
        float(bias[rows].detach().abs().max()) == 0.0
        for _, bias, rows in key_bias_blocks(torch_model)
    )
    with torch.no_grad():
        for _, bias, rows in key_bias_blocks(torch_model):
            bias[rows] = torch.randn(rows.stop - rows.start)
    src, tgt = ids(rng, 2, 7, [7, 3]), ids(rng, 2, 5, [5, 2])
    torch_logits = torch_model(torch.from_numpy(src), torch.from_numpy(tgt))
    imported = from_torch(torch_model).eval()
    close(
        imported.forward(backend.get_xp().asarray(src), backend.get_xp().asarray(tgt)), torch_logits
    )


def test_from_torch_fills_a_given_model_in_place(float64):
    model = Transformer(tiny_config(), rng=7)
    other = Transformer(tiny_config(), rng=8)
    table = other.src_embed.embedding.W_E
    assert from_torch(to_torch(model), other) is other
    assert other.src_embed.embedding.W_E is table  # the same array, now model's values
    assert np.array_equal(backend.to_numpy(table), backend.to_numpy(model.src_embed.embedding.W_E))


def test_torch_model_follows_train_and_eval_mode(float64):
    model = Transformer(tiny_config(dropout=0.1), rng=9)
    assert to_torch(model).training
    assert not to_torch(model.eval()).training
    assert not from_torch(to_torch(model)).training


# ------------------------------------------------------------ layer by layer


def _torch_mha(layer):
    mha = torch.nn.MultiheadAttention(layer.d_model, layer.h, batch_first=True)
    d = layer.d_model
    with torch.no_grad():
        W_Q, W_K, W_V, W_O = layer.W_Q.params, layer.W_K.params, layer.W_V.params, layer.W_O.params
        mha.in_proj_weight.copy_(torch.cat([t(W_Q["W"]).T, t(W_K["W"]).T, t(W_V["W"]).T]))
        mha.in_proj_bias.copy_(torch.cat([t(W_Q["b"]), torch.zeros(d), t(W_V["b"])]))
        mha.out_proj.weight.copy_(t(W_O["W"]).T)
        mha.out_proj.bias.copy_(t(W_O["b"]))
    return mha


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_multi_head_attention_matches_torch(float64, randn, cross):
    layer = MultiHeadAttention(16, 4, rng=10)
    for _, value, _ in layer.named_parameters():  # non-zero biases, so they are checked too
        value += 0.1 * randn(*value.shape)
    x, memory = randn(3, 5, 16), randn(3, 7, 16)
    lengths = [7, 4, 1]
    key_ids = np.array([[1] * n + [PAD] * (7 - n) for n in lengths])
    keys = memory if cross else x
    key_ids = key_ids if cross else key_ids[:, :5]
    mask = padding_mask(backend.get_xp().asarray(key_ids), PAD)  # (B, 1, T_k), True = may attend
    out = layer.forward(x, memory, mask=mask) if cross else layer.forward(x, mask=mask)
    upstream = randn(*out.shape)
    grads = layer.backward(upstream)
    dx, dmemory = grads if cross else (grads, None)

    mha = _torch_mha(layer)
    tx, tkeys = t(x).requires_grad_(), t(keys).requires_grad_()
    tkeys_in = tkeys if cross else tx
    torch_out, _ = mha(tx, tkeys_in, tkeys_in, key_padding_mask=torch.from_numpy(key_ids == PAD))
    (torch_out * t(upstream)).sum().backward()
    close(out, torch_out)
    close(dx, tx.grad)
    if cross:
        close(dmemory, tkeys.grad)
    d = layer.d_model
    close(layer.W_Q.grads["W"], mha.in_proj_weight.grad[:d].T)
    close(layer.W_K.grads["W"], mha.in_proj_weight.grad[d:2 * d].T)
    close(layer.W_V.grads["W"], mha.in_proj_weight.grad[2 * d:].T)
    close(layer.W_Q.grads["b"], mha.in_proj_bias.grad[:d])
    close(layer.W_V.grads["b"], mha.in_proj_bias.grad[2 * d:])
    close(layer.W_O.grads["W"], mha.out_proj.weight.grad.T)
    close(layer.W_O.grads["b"], mha.out_proj.bias.grad)


def test_layer_norm_matches_torch(float64, randn):
    layer = LayerNorm(12)
    layer.params["gamma"][...] = 1.0 + randn(12)
    layer.params["beta"][...] = randn(12)
    x = 3.0 * randn(4, 5, 12) + 1.5
    out = layer.forward(x)
    upstream = randn(*out.shape)
    dx = layer.backward(upstream)
    torch_norm = torch.nn.LayerNorm(12, eps=1e-5)
    with torch.no_grad():
        torch_norm.weight.copy_(t(layer.params["gamma"]))
        torch_norm.bias.copy_(t(layer.params["beta"]))
    tx = t(x).requires_grad_()
    torch_out = torch_norm(tx)
    (torch_out * t(upstream)).sum().backward()
    close(out, torch_out)
    close(dx, tx.grad)
    close(layer.grads["gamma"], torch_norm.weight.grad)
    close(layer.grads["beta"], torch_norm.bias.grad)


def test_embedding_matches_torch_with_repeated_ids(float64, randn):
    layer = Embedding(9, 6, rng=11)
    token_ids = np.array([[1, 4, 4, 0], [8, 1, 4, 2]])  # 4 three times: its gradients add up
    out = layer.forward(backend.get_xp().asarray(token_ids))
    upstream = randn(*out.shape)
    layer.backward(upstream)
    torch_embedding = torch.nn.Embedding(9, 6)
    with torch.no_grad():
        torch_embedding.weight.copy_(t(layer.params["W_E"]))
    torch_out = torch_embedding(torch.from_numpy(token_ids)) * 6**0.5
    (torch_out * t(upstream)).sum().backward()
    close(out, torch_out)
    close(layer.grads["W_E"], torch_embedding.weight.grad)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothed_cross_entropy_matches_torch(float64, randn, smoothing):
    logits = 4.0 * randn(3, 5, VOCAB)
    targets = np.random.default_rng(12).integers(1, VOCAB, size=(3, 5))
    targets[0, 3:] = PAD
    targets[2, 1:] = PAD
    loss_fn = LabelSmoothedCrossEntropy(smoothing, pad_id=PAD)
    loss = loss_fn.forward(logits, backend.get_xp().asarray(targets))
    dlogits = loss_fn.backward()
    tlogits = t(logits).requires_grad_()
    torch_loss = torch.nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=PAD)(
        tlogits.reshape(-1, VOCAB), torch.from_numpy(targets).reshape(-1))
    torch_loss.backward()
    close(loss, torch_loss)
    close(dlogits, tlogits.grad)


def test_positional_encoding_table_matches_torch_side(float64):
    from minitrans.interop.torch_modules import sinusoidal_table as torch_table

    close(sinusoidal_table(50, 10), torch_table(50, 10))
    close(sinusoidal_table(7, 5), torch_table(7, 5))  # odd d_model: a last unpaired sine


# ------------------------------------------------------------ optimiser


@pytest.mark.parametrize("decoder_only", [False, True], ids=["encoder-decoder", "decoder-only"])
def test_adam_with_the_paper_schedule_matches_torch_adam_with_lambda_lr(float64, decoder_only):
    rng = np.random.default_rng(13)
    config = tiny_config(decoder_only=decoder_only, tie_embeddings=True)
    model = (DecoderOnlyLM if decoder_only else Transformer)(config, rng=14)
    torch_model = to_torch(model)
    warmup, factor = 3, 2.0
    optimizer = Adam(model, betas=(0.9, 0.98), eps=1e-9)
    torch_optimizer, scheduler = paper_optimizer(torch_model, warmup, factor)
    loss_fn = LabelSmoothedCrossEntropy(0.1, pad_id=PAD)
    torch_loss_fn = paper_loss(config, 0.1)
    xp = backend.get_xp()

    for step in range(1, 7):
        tokens = ids(rng, 3, 8, [8, 5, 6])
        inputs = (tokens[:, :-1],) if decoder_only else (ids(rng, 3, 7, [7, 7, 4]), tokens[:, :-1])
        targets = tokens[:, 1:]
        model.zero_grad()
        loss = loss_fn.forward(model.forward(*map(xp.asarray, inputs)), xp.asarray(targets))
        model.backward(loss_fn.backward())
        lr = optimizer.step(transformer_lr(step, config.d_model, warmup, factor))

        torch_optimizer.zero_grad()
        torch_logits = torch_model(*map(torch.from_numpy, inputs))
        torch_loss = torch_loss_fn(
            torch_logits.reshape(-1, VOCAB), torch.from_numpy(targets).reshape(-1)
        )
        torch_loss.backward()
        assert scheduler.get_last_lr()[0] == pytest.approx(lr, rel=1e-12)
        torch_optimizer.step()
        scheduler.step()
        close(loss, torch_loss)

    for link in parameter_links(model, torch_model):
        assert (
            relative_error(backend.to_numpy(link.value), link.torch_value().detach().numpy())
            < TOLERANCE
        ), link.name
    # and the trained PyTorch weights come back as the same model
    back = from_torch(torch_model)
    for (name, ours, _), (_, theirs, _) in zip(model.named_parameters(), back.named_parameters()):
        assert relative_error(backend.to_numpy(ours), backend.to_numpy(theirs)) < TOLERANCE, name
