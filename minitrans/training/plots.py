"""Figures of a run: loss and learning-rate curves, attention heat maps.

matplotlib is optional (``pip install "minitrans[train]"``); without it the
functions raise a RuntimeError that says how to install it.
"""

import os


def _figure(figsize):
    """A matplotlib Figure that is not registered with pyplot: drawing to a
    file this way needs no window and leaves a notebook's inline plotting
    (pyplot's backend) untouched."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError('plots need matplotlib: pip install "minitrans[train]"') from None
    figure = Figure(figsize=figsize)
    return figure, figure.subplots()


def save_curve(path, steps, values, title, ylabel, log_y=False, extra=None, label=None):
    """A line plot of ``values`` against ``steps``; ``extra`` adds
    (steps, values, label) series, such as held-out loss."""
    figure, axes = _figure((6, 4))
    axes.plot(steps, values, label=label or ylabel, linewidth=1)
    for extra_steps, extra_values, label in extra or []:
        axes.plot(extra_steps, extra_values, "o-", label=label)
    if log_y:
        axes.set_yscale("log")
    axes.set_title(title)
    axes.set_xlabel("training step")
    axes.set_ylabel(ylabel)
    if extra:
        axes.legend()
    figure.tight_layout()
    _save(figure, path)


def save_attention(path, weights, source_tokens, target_tokens, title):
    """A heat map of one head's attention: rows are target (query) tokens,
    columns source (key) tokens, colour the weight."""
    figure, axes = _figure((1 + 0.45 * len(source_tokens), 1 + 0.45 * len(target_tokens)))
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=90)
    axes.set_yticks(range(len(target_tokens)), target_tokens)
    axes.set_xlabel("source (keys)")
    axes.set_ylabel("output (queries)")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, fraction=0.046)
    figure.tight_layout()
    _save(figure, path)


def _save(figure, path):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    figure.savefig(path, dpi=100)
