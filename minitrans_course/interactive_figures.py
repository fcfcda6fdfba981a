"""The course's interactive figures, each computed by minitrans's own
functions for a grid of control values and drawn by ``SliderFigure``
(``minitrans_course.interactive``): the arrays a slider moves through are
exactly what the library computes.

- ``softmax_temperature_figure``: softmax(logits / T) as T moves (lesson 2)
- ``scaled_scores_figure``: softmax of q.k with and without 1/sqrt(d_k) (lesson 2)
- ``positional_offsets_figure``: PE(pos).PE(pos + k) against k, by d_model (lesson 4)
- ``learning_rate_figure``: the warm-up schedule, by warmup and d_model (lesson 13)
- ``sampling_filters_figure``: top-k then top-p on a next-token distribution (lesson 16)
- ``attention_figure``: a trained model's attention, by sentence, layer and head (lesson 14)
"""

import math

from minitrans.core import backend
from minitrans.decoding.sampling import top_k_filter, top_p_filter
from minitrans.layers.positional import sinusoidal_table
from minitrans.ops.softmax import softmax
from minitrans_course.interactive import SliderFigure, rounded
from minitrans.training.attention_maps import decode_and_attend
from minitrans.training.optimisation.schedule import transformer_lr

TEMPERATURES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


def _vector(values):
    """A float64 array of the current backend from a list or any array."""
    return backend.get_xp().asarray(
        backend.to_numpy(values) if backend.is_array(values) else values, dtype="float64"
    )


def _entropy(probs):
    """Entropy in nats of a probability vector (0 log 0 taken as 0)."""
    return -sum(p * math.log(p) for p in backend.to_numpy(probs).tolist() if p > 0)


def softmax_temperature_figure(logits, labels=None, temperatures=TEMPERATURES):
    """Bars of softmax(logits / T), (V,), one frame per temperature T.

    Small T sharpens towards the largest logit (T -> 0 is argmax), large T
    flattens towards uniform; the note gives the largest weight and the entropy.
    """
    z = _vector(logits)
    frames = []
    for t in temperatures:
        probs = softmax(z / t)
        frames.append(
            {
                "series": [rounded(probs)],
                "note": f"largest weight {float(probs.max()):.3f}, "
                f"entropy {_entropy(probs):.3f} nats",
            }
        )
    labels = labels or [f"{v:+.1f}" for v in backend.to_numpy(z).tolist()]
    start = min(range(len(temperatures)), key=lambda i: abs(temperatures[i] - 1.0))
    return SliderFigure(
        "softmax(logits / T)",
        [("temperature T", list(temperatures))],
        frames,
        x=labels,
        names=["probability"],
        xlabel="token (its logit)",
        ylabel="probability",
        ylim=(0, 1),
        start=[start],
    )


def scaled_scores_figure(
    sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), keys=8, queries=500, seed=0
):
    """For each d_k: ``queries`` random queries q (d_k,), each against its own
    ``keys`` random keys (keys, d_k), standard normal components; bars of
    softmax(q.k) and softmax(q.k / sqrt(d_k)), each row sorted from the
    largest weight down, averaged over the queries: (keys,) per series.

    Without the scale the scores' variance is d_k and the softmax turns
    one-hot as d_k grows; with it the variance stays 1.
    """
    rng, xp = backend.host_rng(seed), backend.get_xp()
    frames = []
    for d_k in sizes:
        q = _vector(rng.standard_normal((queries, d_k, 1)))  # (queries, d_k, 1)
        k = _vector(rng.standard_normal((queries, keys, d_k)))  # (queries, keys, d_k)
        scores = (k @ q)[..., 0]  # (queries, keys)
        raw, scaled = softmax(scores), softmax(scores / math.sqrt(d_k))
        raw, scaled = -xp.sort(-raw, axis=-1), -xp.sort(-scaled, axis=-1)  # largest first
        frames.append(
            {
                "series": [rounded(raw.mean(axis=0)), rounded(scaled.mean(axis=0))],
                "note": f"mean largest weight {float(raw[:, 0].mean()):.3f} unscaled, "
                f"{float(scaled[:, 0].mean()):.3f} scaled (uniform: {1 / keys:.3f})",
            }
        )
    return SliderFigure(
        "Attention weights of a query, sorted (mean of many)",
        [("d_k", list(sizes))],
        frames,
        x=list(range(1, keys + 1)),
        names=["softmax(q.k)", "softmax(q.k/sqrt(d_k))"],
        xlabel="key, by weight",
        ylabel="attention weight",
        ylim=(0, 1),
    )


def positional_offsets_figure(d_models=(8, 16, 32, 64, 128, 256, 512), offsets=100, pos=0):
    """PE(pos) . PE(pos + k) / (d_model / 2) for k = 0..offsets, one frame per d_model.

    The dot product is sum_i cos(k w_i), the same for every pos: it depends
    on the offset only. Its wavelengths, 2 pi 10000^(2i/d_model), run from
    2 pi to nearly 2 pi 10000 (the note gives the longest).
    """
    frames = []
    for d_model in d_models:
        with backend.using(dtype="float64"):
            table = sinusoidal_table(pos + offsets + 1, d_model)  # (pos + offsets + 1, d_model)
        dots = table[pos:] @ table[pos] / (d_model / 2)  # (offsets + 1,)
        longest = 2 * math.pi * 10000 ** ((d_model - 2 + d_model % 2) / d_model)
        frames.append(
            {
                "series": [rounded(dots)],
                "note": f"{(d_model + 1) // 2} wavelengths, 2 pi = 6.28 up to "
                f"{longest:,.0f} positions",
            }
        )
    return SliderFigure(
        f"PE({pos}) . PE({pos} + k), divided by d_model / 2",
        [("d_model", list(d_models))],
        frames,
        kind="lines",
        x=list(range(offsets + 1)),
        names=["dot product"],
        xlabel="offset k",
        ylabel="similarity",
        ylim=(-0.5, 1),
        start=[len(d_models) // 2],
    )


def learning_rate_figure(
    warmups=(500, 1000, 2000, 4000, 8000),
    d_models=(64, 128, 256, 512, 1024),
    steps=20000,
    points=200,
    factor=1.0,
):
    """transformer_lr(step, d_model, warmup) for steps 1..``steps`` (``points``
    of them), one frame per (warmup, d_model): the peak moves right and down
    as warmup grows, and down as d_model grows."""
    step_grid = sorted({max(1, round(steps * i / (points - 1))) for i in range(points)})
    frames = []
    for warmup in warmups:
        for d_model in d_models:
            rates = [transformer_lr(s, d_model, warmup, factor) for s in step_grid]
            peak = transformer_lr(warmup, d_model, warmup, factor)
            frames.append({"series": [rounded(rates)], "note": f"peak {peak:.2e} at step {warmup}"})
    return SliderFigure(
        "The learning-rate schedule of section 5.3",
        [("warmup", list(warmups)), ("d_model", list(d_models))],
        frames,
        kind="lines",
        x=step_grid,
        names=["learning rate"],
        xlabel="step",
        ylabel="learning rate",
        start=[len(warmups) // 2, len(d_models) // 2],
    )


def sampling_filters_figure(logits, labels, ks=None, ps=(0.5, 0.7, 0.8, 0.9, 0.95, 1.0)):
    """A next-token distribution softmax(logits), (V,), and what sampling
    draws from after top_k_filter(k) and then top_p_filter(p), renormalised,
    one frame per (k, p): the tokens left and their new probabilities."""
    z = _vector(logits)[None, :]  # (1, V)
    ks = ks or list(range(1, z.shape[1] + 1))
    full = rounded(softmax(z)[0])
    frames = []
    for k in ks:
        for p in ps:
            kept = top_p_filter(softmax(top_k_filter(z, k)), p)[0]  # (V,)
            left = int((kept > 0).sum())
            frames.append(
                {"series": [full, rounded(kept)], "note": f"{left} token(s) can be drawn"}
            )
    return SliderFigure(
        "Top-k, then top-p, on the next-token distribution",
        [("k", list(ks)), ("p", list(ps))],
        frames,
        x=list(labels),
        names=["softmax(logits)", "after top-k and top-p"],
        xlabel="token",
        ylabel="probability",
        start=[len(ks) - 1, len(ps) - 1],
    )


def attention_figure(model, task, texts, kind="cross"):
    """Heat maps of a trained model's attention, one frame per (sentence,
    layer, head), chosen from three menus. Each text is decoded greedily and
    rerun by ``training.attention_maps.decode_and_attend``; ``kind`` is
    "cross" (output over source), "decoder" or "encoder". Row i of a map,
    (T_q, T_k), is what the query at position i looked at; it sums to 1."""
    panels = [decode_and_attend(model, task, text)[0] for text in texts]
    if kind not in panels[0]:
        raise ValueError(f"kind: expected one of {sorted(panels[0])}, got {kind!r}")
    layers, heads = panels[0][kind].weights.shape[:2]  # (N, h, T_q, T_k)
    frames = []
    for text_panels in panels:
        panel = text_panels[kind]
        for layer in range(layers):
            for head in range(heads):
                frames.append(
                    {
                        "matrix": rounded(panel.weights[layer, head], digits=3),
                        "rows": panel.queries,
                        "cols": panel.keys,
                    }
                )
    return SliderFigure(
        f"Attention ({kind}): rows produced, columns read",
        [
            ("sentence", list(texts)),
            ("layer", list(range(1, layers + 1))),
            ("head", list(range(1, heads + 1))),
        ],
        frames,
        kind="heatmap",
        menu=True,
    )
