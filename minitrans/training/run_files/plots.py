"""Figures of a run: loss and learning-rate curves, attention heat maps.

matplotlib is optional (``pip install "minitrans[train]"``); without it the
functions raise a RuntimeError that says how to install it.
"""

import os


def _new_figure(figsize, layout=None):
    """A matplotlib Figure that is not registered with pyplot: drawing to a
    file this way needs no window and leaves a notebook's inline plotting
    (pyplot's backend) untouched."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError('plots need matplotlib: pip install "minitrans[train]"') from None
    return Figure(figsize=figsize, layout=layout)


def _figure(figsize):
    """A new figure with one set of axes."""
    figure = _new_figure(figsize)
    return figure, figure.subplots()


def save_curve(path, steps, values, title, ylabel, log_y=False, extra=None, label=None):
    """A line plot of ``values`` against ``steps``; ``extra`` adds
    (steps, values, label) series, such as held-out loss."""
    figure, axes = _figure((6, 4))
    axes.plot(steps, values, label=label or ylabel, linewidth=1)
    for (extra_steps, extra_values, label), style in zip(extra or [], ["o-", "s--", "^:"] * 9):
        axes.plot(extra_steps, extra_values, style, label=label)
    if log_y:
        axes.set_yscale("log")
    axes.set_title(title)
    axes.set_xlabel("training step")
    axes.set_ylabel(ylabel)
    if extra:
        axes.legend(fontsize="small")
    figure.tight_layout()
    _save(figure, path)


def save_losses(path, history, evaluations, task_name, label_smoothing, decoder_only):
    """loss.png of a run: the training loss of every step and, at each
    evaluation, two held-out losses (``evaluation.teacher_forced_metrics``):

    - the training objective (label smoothing, every target token, a
      language model's prompt included) on held-out pairs: the same measure
      as the training curve, so the gap between them is overfitting (and
      dropout, which is on in training only);
    - the held-out loss that the log prints: no smoothing, and for a
      language model only the answer's tokens. Smoothing puts a floor under
      the objective, and a prompt's random digits keep the objective high,
      so this curve is lower and is not compared with the training curve.

    ``history``/``evaluations`` as a Trainer keeps them; evaluations from
    before the objective was recorded draw the second curve only."""
    every = "every token, prompt too" if decoder_only else "every token"
    extra = []
    with_objective = [e for e in evaluations if "objective" in e]
    if with_objective:
        extra.append(([e["step"] for e in with_objective], [e["objective"] for e in with_objective],
                      "held-out, the same loss, no dropout"))
    if evaluations:
        scored = "answer only" if decoder_only else "every token"
        extra.append(([e["step"] for e in evaluations], [e["loss"] for e in evaluations],
                      f"held-out loss (no smoothing, {scored})"))
    save_curve(path, history["step"], history["loss"], f"{task_name}: loss", "loss", log_y=True,
               extra=extra, label=f"training loss (smoothing {label_smoothing}, {every})")


def save_run_plots(trainer):
    """loss.png and lr.png of a Trainer's run, in its folder; returns their
    paths ([] before the first step, or without matplotlib, said in its log)."""
    if not trainer.history["step"]:
        return []
    folder, config = trainer.config.out_dir, trainer.config
    paths = [os.path.join(folder, "loss.png"), os.path.join(folder, "lr.png")]
    try:
        save_losses(paths[0], trainer.history, trainer.evaluations, trainer.task.name,
                    config.label_smoothing, trainer.task.kind == "lm")
        save_curve(paths[1], trainer.history["step"], trainer.history["lr"],
                   f"learning rate (warmup {config.warmup})", "learning rate")
    except RuntimeError as error:  # matplotlib is not installed
        trainer.log(f"no plots: {error}")
        return []
    return paths


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


def save_attention_grid(path, weights, queries, keys, title, layers=None):
    """Heat maps of every layer and head: weights (N, h, T_q, T_k), a row of
    panels per layer, a column per head, one colour scale (0 to 1) for all.
    Rows of a map are the queries (labelled by ``queries``), columns the keys
    (``keys``); ``layers`` numbers the rows (default 0..N-1)."""
    n_layers, n_heads, length_q, length_k = weights.shape
    layers = range(n_layers) if layers is None else layers
    cell = (1.2 + 0.22 * length_k, 0.9 + 0.22 * length_q)  # inches per heat map, with labels
    size = (min(cell[0] * n_heads + 1.2, 60), min(cell[1] * n_layers + 0.8, 60))
    figure = _new_figure(size, layout="constrained")  # room for labels and the colour bar
    grid = figure.subplots(n_layers, n_heads, squeeze=False)
    for (row, column), axes in zip(
        ((r, c) for r in range(n_layers) for c in range(n_heads)), grid.flat
    ):
        image = axes.imshow(weights[row, column], cmap="viridis", vmin=0.0, vmax=1.0)
        axes.set_title(f"layer {layers[row]}, head {column}", fontsize=9)
        axes.set_xticks(range(length_k), keys, rotation=90, fontsize=7)
        axes.set_yticks(range(length_q), queries if column == 0 else [], fontsize=7)
    figure.suptitle(title)
    figure.supxlabel("keys: the token read at each position")
    figure.supylabel("queries: the token produced")
    figure.colorbar(image, ax=grid, fraction=0.02)
    _save(figure, path)


def _save(figure, path):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    figure.savefig(path, dpi=100)
