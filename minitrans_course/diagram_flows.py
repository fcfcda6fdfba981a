"""Two close-ups of Figure 1, drawn from a ModelConfig with its sizes.

``draw_head_split(config)``: multi-head attention's arrays, (B, T, d_model)
split into h heads of (B, T, d_k), each head's attention, the heads
concatenated back to (B, T, h d_k) and mixed by W_O (§3.2.2).

``draw_token_path(config)``: the vector of one token on its way through one
encoder layer, each step with its size: attention (the only step that reads
the other positions), add & norm, the feed-forward network's d_ff-wide
hidden layer, add & norm (§3.1, §3.3), in the order the config's post-norm
or pre-norm gives.
"""

from minitrans_course.diagram_shapes import arrow, box, figure_and_axes

MAX_HEADS_DRAWN = 8  # more heads are drawn as the first ones and a "more" note


def _head_colour(index):
    from matplotlib import colormaps

    return colormaps["tab10"](index % 10)


def _striped_block(ax, x, y, width, height, stripes, label):
    """A (T, features) array as a block cut into ``stripes`` coloured
    column groups (one per head), with its label below."""
    from matplotlib.patches import Rectangle

    for index in range(stripes):
        ax.add_patch(
            Rectangle(
                (x + index * width / stripes, y),
                width / stripes,
                height,
                facecolor=_head_colour(index),
                alpha=0.55,
                edgecolor="#333333",
                lw=0.6,
            )
        )
    ax.text(x + width / 2, y - 0.15, label, ha="center", va="top", fontsize=7.5)


def draw_head_split(config, ax=None):
    """Multi-head attention for ``config``'s sizes: returns the Figure
    (drawn into ``ax`` when given)."""
    d, h = config.d_model, config.h
    d_k = d // h
    shown = min(h, MAX_HEADS_DRAWN)
    row = 1.0  # height of one head's row
    figure, ax = figure_and_axes(ax, (11, 1.2 + 0.55 * shown * row + 1.2))
    top = shown * row
    middle = top / 2
    _striped_block(
        ax, 0.0, middle - 0.6, 1.6, 1.2, shown, f"x W_Q, x W_K, x W_V\n(B, T, d_model={d})"
    )
    ax.text(0.8, middle + 0.8, "Q, K, V", ha="center", fontsize=8, weight="bold")
    for index in range(shown):
        y = top - (index + 0.5) * row
        colour = _head_colour(index)
        arrow(ax, (1.65, middle), (2.9, y))
        _striped_block(ax, 3.0, y - 0.25, 1.6 / shown, 0.5, 1, "")
        ax.patches[-1].set_facecolor(colour)
        ax.text(3.0 + 1.6 / shown + 0.1, y, f"head {index}: (B, T, {d_k})", fontsize=7, va="center")
        arrow(ax, (5.4, y), (5.75, y))
        box(ax, 7.0, y, f"softmax(Q K^T / sqrt({d_k})) V", "white", width=2.4, height=0.5 * row)
        arrow(ax, (8.25, y), (8.9, middle))
    if h > shown:
        ax.text(4.0, -0.35, f"... and {h - shown} more heads ({h} in all)", ha="center", fontsize=8)
    ax.text(
        3.2,
        top + 0.25,
        f"reshape (B, T, h={h}, d_k={d_k}), transpose: (B, h, T, d_k)",
        ha="center",
        fontsize=8,
    )
    ax.text(
        7.0,
        top - 0.1,
        "each head attends on its own",
        ha="center",
        va="bottom",
        fontsize=8,
        style="italic",
    )
    _striped_block(
        ax,
        9.0,
        middle - 0.6,
        1.6,
        1.2,
        shown,
        f"concatenate: transpose,\nreshape (B, T, h d_k = {h * d_k})",
    )
    arrow(ax, (10.65, middle), (11.15, middle))
    box(ax, 11.75, middle, f"W_O\n({d}, {d})", "#ffe0b3", width=1.1, height=0.8)
    arrow(ax, (12.35, middle), (12.8, middle))
    ax.text(12.85, middle, f"(B, T, {d})", va="center", fontsize=8)
    ax.text(
        7.0,
        top + 0.85,
        f"Multi-head attention: d_model={d} split into h={h} heads of "
        f"d_k={d_k}, and merged back",
        ha="center",
        fontsize=10,
        weight="bold",
    )
    ax.set_xlim(-0.3, 14.3)
    ax.set_ylim(-0.9, top + 1.2)
    ax.set_axis_off()
    return figure


def _token_steps(config):
    """The steps of one token through an encoder layer: a list of
    (operation, name of the vector it gives, its size)."""
    d, d_ff = config.d_model, config.d_ff
    attention = ("self-attention: a weighted\nsum over all S positions", "a", d)
    feed_forward = [("W_1, b_1, ReLU", "hidden", d_ff), ("W_2, b_2", "f", d)]
    if config.pre_norm:
        return [
            ("LayerNorm", "n", d),
            attention,
            ("+ x (residual)", "r", d),
            ("LayerNorm", "n'", d),
            *feed_forward,
            ("+ r (residual)", "output", d),
        ]
    return [attention, ("+ x, LayerNorm", "y", d), *feed_forward, ("+ y, LayerNorm", "output", d)]


def draw_token_path(config, ax=None):
    """One token's vector through one encoder layer of ``config``: returns
    the Figure (drawn into ``ax`` when given). Each vector is a bar whose
    height is its size."""
    from matplotlib.patches import Rectangle

    steps = _token_steps(config)
    largest = max(config.d_model, config.d_ff)
    figure, ax = figure_and_axes(ax, (1.6 * (len(steps) + 1), 4.2))
    vectors = [("x", config.d_model)] + [(name, size) for _, name, size in steps]
    for index, (name, size) in enumerate(vectors):
        height = 2.6 * size / largest
        x = 2.0 * index
        colour = "#cfe2f3" if size == config.d_model else "#f8cecc"
        ax.add_patch(
            Rectangle((x - 0.15, 0.5), 0.3, height, facecolor=colour, edgecolor="#333333", lw=0.8)
        )
        ax.text(x, 0.35, f"{name}\n({size})", ha="center", va="top", fontsize=8)
    for index, (operation, _, _) in enumerate(steps):
        x = 2.0 * index
        arrow(ax, (x + 0.25, 0.8), (x + 1.75, 0.8))
        ax.text(x + 1.0, 0.95, operation, ha="center", va="bottom", fontsize=7)
    norm = "pre-norm" if config.pre_norm else "post-norm"
    ax.text(
        x / 2 + 1.0,
        3.75,
        f"One token through an encoder layer ({norm}): d_model="
        f"{config.d_model}, d_ff={config.d_ff}",
        ha="center",
        fontsize=10,
        weight="bold",
    )
    ax.text(
        x / 2 + 1.0,
        3.4,
        "only attention reads the other tokens; every other step " "works on this position alone",
        ha="center",
        fontsize=8,
        style="italic",
    )
    ax.set_xlim(-0.8, 2.0 * len(steps) + 0.8)
    ax.set_ylim(-0.5, 4.0)
    ax.set_axis_off()
    return figure
