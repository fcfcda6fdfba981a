"""Train a small Transformer to copy ten random digits, then look inside it.

Run from the repository root, after `pip install ".[train]"`:

    python examples/train_copy.py              # the full run, about half a minute on 2 cores
    python examples/train_copy.py --steps 50   # a quick smoke run (it will not learn much)

Copying is the simplest sequence-to-sequence task: the decoder only has to
find, for each output position, the matching source position. That makes
the cross-attention heat map easy to read: a clean diagonal.

It prints the held-out exact match and a few decoded samples, and writes to
runs/example-copy/: loss.png (training and held-out loss), attention.png
(where the decoder looked while copying one held-out sequence), lr.png (the
learning-rate schedule) and the trainer's checkpoint.npz.
"""

import argparse
import os

from minitrans.training import attention_maps, experiment
from minitrans.training.optimisation import evaluation
from minitrans.training.run_files import plots

STEPS = 2000  # the copy task's default; training stops early at 100% exact match
OUT_DIR = os.path.join("runs", "example-copy")
SEED = 0  # same seed, same data, same initial weights, same result
SAMPLES = 5  # held-out sequences printed after training


def save_cross_attention(model, task, source, path):
    """Greedy-decode ``source`` and save the last decoder layer's
    cross-attention, averaged over heads, as a heat map."""
    source_tokens, output_tokens, weights = attention_maps.attention_for(
        model, task, source
    )  # weights (h, L, T_src)
    title = f"copy: cross-attention,\nlast decoder layer, mean of {model.config.h} heads"
    plots.save_attention(path, weights.mean(axis=0), source_tokens, output_tokens, title)
    return path


def main():
    parser = argparse.ArgumentParser(description="Train a Transformer on the copy task.")
    parser.add_argument(
        "--steps", type=int, default=STEPS, help=f"training steps (default {STEPS})"
    )
    args = parser.parse_args()

    # The task's tuned defaults (model size, batch, learning rate), with our
    # own step count, seed and output folder.
    config = experiment.train_config_for("copy", steps=args.steps, seed=SEED, out_dir=OUT_DIR)
    trainer = experiment.new_trainer(config)  # builds the task and a model sized for it
    task, model = trainer.task, trainer.evaluated_model  # the weights' average, if kept
    print(task.description)
    print(f"{len(task.train)} training and {len(task.valid)} held-out sequences; "
          f"model of {model.num_parameters():,} parameters")

    # Every eval_every steps fit() decodes the held-out set greedily and
    # checks exact match; it returns the last of these evaluations.
    result = trainer.fit()
    print(f"\nheld-out exact match after {trainer.step} steps: "
          f"{result['exact_match']:.1%} of {result['pairs']} sequences")

    print("\nsamples (source -> greedy output):")
    samples = task.valid[:SAMPLES]
    _, outputs = evaluation.exact_match(model, task, samples)  # (fraction right, decoded texts)
    for (source, target), output in zip(samples, outputs):
        print(f"  {'ok ' if output == target else 'BAD'} {source} -> {output}")

    figures = trainer.save_plots()  # loss.png and lr.png
    attention_path = os.path.join(OUT_DIR, "attention.png")
    figures.append(save_cross_attention(model, task, task.valid[0][0], attention_path))
    print("\nfigures:", ", ".join(figures))


if __name__ == "__main__":
    main()
