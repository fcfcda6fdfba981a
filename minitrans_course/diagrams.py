"""Figure 1 of the paper, drawn from a ModelConfig: the "you are here" map.

``draw_architecture(config)`` draws the model that ``Transformer(config)``
(or ``DecoderOnlyLM`` for ``config.decoder_only``) builds: the embeddings,
the positional encoding, the encoder and decoder stacks with every sub-layer
as a box, the residual paths around them, the masks where they apply, the
memory that the decoder's cross-attention reads, the linear + softmax head,
and the sizes taken from the config. ``highlight`` names a part (or a list
of them): it is drawn in a strong colour and the rest is greyed, so that a
lesson can open with the whole model and show where its layer sits.

Each box is a patch whose ``gid`` is the part it belongs to (PARTS), which
is how the tests find the highlighted boxes. matplotlib is optional
(``pip install "minitrans[train]"``); without it the functions raise a
RuntimeError that says how to install it.
"""

from minitrans.core import checks
from minitrans_course.diagram_shapes import BOX_HEIGHT, BOX_WIDTH, GAP, STRONG, arrow, box
from minitrans_course.diagram_shapes import figure_and_axes

# The parts a lesson may highlight, in the order of the data's path.
PARTS = (
    "embedding",
    "positional",
    "self_attn",
    "masked_self_attn",
    "cross_attn",
    "add_norm",
    "feed_forward",
    "output",
)

# The paper's colours, roughly: attention orange, feed-forward blue, Add &
# Norm yellow, embeddings pink, the head purple.
COLOURS = {
    "embedding": "#f8cecc",
    "positional": "#ffffff",
    "self_attn": "#ffe0b3",
    "masked_self_attn": "#ffe0b3",
    "cross_attn": "#ffe0b3",
    "add_norm": "#fff2b3",
    "feed_forward": "#cfe2f3",
    "output": "#e1d5e7",
}
GREY = "#eeeeee"  # every other part, when one is highlighted


def check_highlight(config, highlight):
    """``highlight`` as a tuple of part names: None gives (), one name or a
    list of names of the parts this config has (a decoder-only model has no
    encoder self-attention and no cross-attention)."""
    if highlight is None:
        return ()
    names = (highlight,) if isinstance(highlight, str) else tuple(highlight)
    absent = {"self_attn", "cross_attn"} if config.decoder_only else set()
    for name in names:
        checks.check_choice("highlight", name, [p for p in PARTS if p not in absent])
    return names


def draw_architecture(config, highlight=None, ax=None):
    """Figure 1 for ``config``: returns the matplotlib Figure (drawn into
    ``ax`` when given). ``highlight``: one of PARTS (or a list of them),
    drawn strong and the rest grey; None for the paper's colours everywhere."""
    highlighted = check_highlight(config, highlight)

    def colour(part):
        if not highlighted:
            return COLOURS[part]
        return STRONG if part in highlighted else GREY

    figure, ax = figure_and_axes(ax, (4.6 if config.decoder_only else 8.5, 9.5))
    d = config.d_model
    decoder_x = 2.2 if config.decoder_only else 7.0
    if not config.decoder_only:
        memory_top, _ = _column(ax, config, 2.0, "encoder", colour)
        memory_y = memory_top + 0.35
        arrow(ax, (2.0, memory_top), (2.0, memory_y), style="-")
        ax.text(
            2.0,
            memory_y + 0.12,
            f"memory (B, S, {d}): keys and values\nof every " f"cross-attention",
            ha="center",
            va="bottom",
            fontsize=7,
        )
        ax.plot([2.0, 2.0, 4.6], [memory_y, memory_y, memory_y], color="#333333", lw=1)
    top, cross_ys = _column(ax, config, decoder_x, "decoder", colour)
    for y in cross_ys:  # the encoder's output enters every cross-attention from the left
        ax.plot([4.6, 4.6], [memory_y, y], color="#333333", lw=1)
        arrow(ax, (4.6, y), (decoder_x - BOX_WIDTH / 2, y))
    vocab = config.vocab_size
    tied = "\n(tied to the embedding)" if config.tie_embeddings else ""
    y = top + GAP + BOX_HEIGHT / 2
    arrow(ax, (decoder_x, top), (decoder_x, y - BOX_HEIGHT / 2))
    box(ax, decoder_x, y, f"Linear {d} -> V={vocab}{tied}", colour("output"), "output")
    arrow(ax, (decoder_x, y + BOX_HEIGHT / 2), (decoder_x, y + BOX_HEIGHT / 2 + GAP))
    y += BOX_HEIGHT + GAP
    box(ax, decoder_x, y, "Softmax", colour("output"), "output")
    arrow(ax, (decoder_x, y + BOX_HEIGHT / 2), (decoder_x, y + BOX_HEIGHT / 2 + GAP))
    ax.text(
        decoder_x,
        y + BOX_HEIGHT / 2 + GAP + 0.05,
        f"output probabilities (B, T, {vocab})",
        ha="center",
        va="bottom",
        fontsize=8,
    )
    kind = "decoder-only language model" if config.decoder_only else "Transformer"
    norm = "pre-norm" if config.pre_norm else "post-norm (the paper's)"
    width = 5.6 if config.decoder_only else 11.0
    ax.text(
        (width - 1.0) / 2,
        y + 1.65,
        f"{kind}\nd_model={d}, h={config.h}, N={config.N}, " f"d_ff={config.d_ff}, {norm}",
        ha="center",
        va="top",
        fontsize=9,
        weight="bold",
    )
    ax.set_xlim(-1.0, width)
    ax.set_ylim(-0.3, y + 1.75)
    ax.set_axis_off()
    return figure


def _column(ax, config, x, stack, colour):
    """One stack from its input ids to its output: embedding, positional
    encoding, N layers drawn as one, and the final LayerNorm of pre-norm.
    Returns the y of its top and the y of each cross-attention box."""
    d, h = config.d_model, config.h
    source = stack == "encoder"
    ids = (
        "source ids (B, S)"
        if source
        else ("token ids (B, T)" if config.decoder_only else "target ids, shifted right (B, T)")
    )
    length = "S" if source else "T"
    ax.text(x, 0.0, ids, ha="center", va="center", fontsize=8)
    y = 0.45 + BOX_HEIGHT / 2
    arrow(ax, (x, 0.15), (x, y - BOX_HEIGHT / 2))
    name = "Input" if source else "Output"
    box(ax, x, y, f"{name} Embedding x sqrt({d})", colour("embedding"), "embedding")
    y += BOX_HEIGHT + GAP
    arrow(ax, (x, y - GAP - BOX_HEIGHT / 2), (x, y - BOX_HEIGHT / 2))
    box(
        ax,
        x,
        y,
        f"+ Positional Encoding\nsin, cos; max_len {config.max_len}",
        colour("positional"),
        "positional",
    )
    ax.text(
        x + 0.1,
        y + BOX_HEIGHT / 2 + GAP / 2,
        f"(B, {length}, {d})",
        fontsize=7,
        va="center",
        ha="left",
    )
    pad = f"padding mask (B, 1, {length})"
    if source:
        sublayers = [("self_attn", f"Multi-Head Attention\n{h} heads of d_k={d // h}", pad)]
    else:
        causal = "causal + padding mask (B, T, T)"
        sublayers = [
            (
                "masked_self_attn",
                f"Masked Multi-Head Attention\n{h} heads of d_k=" f"{d // h}",
                causal,
            )
        ]
        if not config.decoder_only:
            sublayers.append(
                (
                    "cross_attn",
                    "Multi-Head Attention\nQ from below, K, V: memory",
                    "source padding mask (B, 1, S)",
                )
            )
    sublayers.append(
        ("feed_forward", f"Feed Forward\n{d} -> d_ff={config.d_ff} -> {d}, ReLU", None)
    )
    start = y + BOX_HEIGHT / 2
    y = start + GAP
    cross_ys = []
    for part, text, mask in sublayers:
        y, sub_y = _sublayer(ax, config, x, y, part, text, mask, colour, source)
        if part == "cross_attn":
            cross_ys.append(sub_y)
    if config.pre_norm:  # the stack's own final LayerNorm
        box(ax, x, y + BOX_HEIGHT / 2, "Layer Norm (final)", colour("add_norm"), "add_norm")
        y += BOX_HEIGHT + GAP
    frame_x = x - BOX_WIDTH / 2 - 0.45
    from matplotlib.patches import Rectangle

    ax.add_patch(
        Rectangle(
            (frame_x, start + 0.1),
            BOX_WIDTH + 0.9,
            y - start - 0.2,
            fill=False,
            linestyle="--",
            edgecolor="#777777",
            zorder=0,
        )
    )
    side = frame_x - 0.1 if source else frame_x + BOX_WIDTH + 1.0
    ax.text(
        side,
        (start + y) / 2,
        f"N={config.N} x",
        ha="right" if source else "left",
        va="center",
        fontsize=9,
        weight="bold",
    )
    return y - GAP, cross_ys


def _sublayer(ax, config, x, y, part, text, mask, colour, source):
    """One sub-layer with its residual path, from ``y`` (the bottom of its
    first box) up; post-norm: Sublayer, then Add & Norm; pre-norm: Layer
    Norm, Sublayer, then Add. Returns the next free y and the sub-layer's y."""
    residual_from = y - GAP / 2
    boxes = [("add_norm", "Layer Norm")] if config.pre_norm else []
    boxes += [(part, text), ("add_norm", "Add" if config.pre_norm else "Add & Norm")]
    centres = []
    for index, (box_part, label) in enumerate(boxes):
        height = BOX_HEIGHT if box_part != "add_norm" else BOX_HEIGHT * 0.6
        centre = y + height / 2
        box(ax, x, centre, label, colour(box_part), box_part, height=height)
        centres.append(centre)
        y += height + GAP
        arrow(ax, (x, y - GAP), (x, y))
    if mask:
        ax.text(
            x + BOX_WIDTH / 2 + 0.08,
            centres[-2],
            mask.replace(" mask", "\nmask"),
            fontsize=6.5,
            style="italic",
            va="center",
            ha="left",
            color="#aa2222",
        )
    # the residual path: from below the sub-layer round its left side into the addition
    residual_x = x - BOX_WIDTH / 2 - 0.22
    line = STRONG if colour("add_norm") == STRONG else "#555555"
    ax.plot(
        [x, residual_x, residual_x],
        [residual_from, residual_from, centres[-1]],
        color=line,
        lw=1.0,
        zorder=1,
    )
    arrow(ax, (residual_x, centres[-1]), (x - BOX_WIDTH / 2, centres[-1]), colour=line)
    return y, centres[-2]
