"""The shapes that the diagrams of minitrans_course/diagrams.py and
minitrans_course/diagram_flows.py are drawn with: a figure (or given axes) in drawing
units, a rounded box with its text, an arrow.

matplotlib is optional (``pip install "minitrans[train]"``); without it
``figure_and_axes`` raises a RuntimeError that says how to install it.
"""

STRONG = "#e4572e"  # the part a lesson is about

BOX_WIDTH, BOX_HEIGHT, GAP = 3.0, 0.62, 0.32  # in the drawing's own units


def figure_and_axes(ax, figsize):
    """The axes to draw into and their Figure: ``ax`` itself when given (a
    notebook's ``plt.subplots``, which pyplot then shows), else a new
    Figure of ``figsize`` inches that is not registered with pyplot (no
    window, no effect on a notebook's inline plots)."""
    if ax is not None:
        return ax.figure, ax
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError('diagrams need matplotlib: pip install "minitrans[train]"') from None
    figure = Figure(figsize=figsize)
    return figure, figure.add_axes((0, 0, 1, 1))


def box(ax, x, y, text, colour, gid=None, width=BOX_WIDTH, height=BOX_HEIGHT):
    """A rounded box centred on (x, y) with its text; returns the patch."""
    from matplotlib.patches import FancyBboxPatch

    patch = FancyBboxPatch(
        (x - width / 2, y - height / 2),
        width,
        height,
        boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=colour,
        edgecolor="#333333",
        linewidth=1.0,
        gid=gid,
        zorder=2,
    )
    ax.add_patch(patch)
    ax.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=7.5,
        zorder=3,
        color="white" if colour == STRONG else "black",
    )
    return patch


def arrow(ax, start, end, colour="#333333", style="-|>"):
    """A straight arrow from ``start`` to ``end`` ((x, y) pairs)."""
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        zorder=1,
        arrowprops=dict(arrowstyle=style, color=colour, linewidth=1.0, shrinkA=0, shrinkB=0),
    )
