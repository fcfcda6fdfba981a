"""Train a small Transformer to translate toy English into a made-up language.

Run from the repository root, after `pip install ".[train]"`:

    python examples/train_translation.py              # the full run, under a minute on 2 cores
    python examples/train_translation.py --steps 50   # a quick smoke run (it will not learn much)

The made-up language puts the verb last, the adjective after its noun and
a particle after the subject ("ka") and the object ("ro"), so words move as
well as change:

    some black birds help the tired teacher
    sen pilun noka ka lo dorma lasu ro hilpa

The cross-attention heat map shows the decoder looking back at the source
word it is translating, which is often not the word at the same position.

It prints the held-out exact match and BLEU, compares greedy decoding with
beam search, shows a few translations, and writes to runs/example-translation/:
loss.png (training and held-out loss), attention.png, lr.png (the
learning-rate schedule) and the trainer's checkpoint.npz.
"""

import argparse
import os

from minitrans.training import attention_maps, experiment
from minitrans.training.optimisation import evaluation
from minitrans.training.run_files import plots

STEPS = 3000  # the translate task's default; training stops early at 98% exact match
OUT_DIR = os.path.join("runs", "example-translation")
SEED = 0  # same seed, same data, same initial weights, same result
BEAM_SIZE = 4
SAMPLES = 5  # held-out sentences printed after training


def save_cross_attention(model, task, source, path):
    """Greedy-decode ``source`` and save the last decoder layer's
    cross-attention, averaged over heads, as a heat map."""
    source_tokens, output_tokens, weights = attention_maps.attention_for(
        model, task, source
    )  # weights (h, L, T_src)
    title = f"translate: cross-attention,\nlast decoder layer, mean of {model.config.h} heads"
    plots.save_attention(path, weights.mean(axis=0), source_tokens, output_tokens, title)
    return path


def main():
    parser = argparse.ArgumentParser(description="Train a Transformer on the toy translation task.")
    parser.add_argument(
        "--steps", type=int, default=STEPS, help=f"training steps (default {STEPS})"
    )
    args = parser.parse_args()

    config = experiment.train_config_for("translate", steps=args.steps, seed=SEED, out_dir=OUT_DIR)
    trainer = experiment.new_trainer(config)  # builds the task and a model sized for it
    task, model = trainer.task, trainer.evaluated_model  # the weights' average, if kept
    print(task.description)
    print(f"{len(task.train)} training and {len(task.valid)} held-out sentence pairs; "
          f"model of {model.num_parameters():,} parameters")
    trainer.fit()

    # Score the held-out sentences, none of which was seen in training.
    valid = task.valid
    sources = [source for source, _ in valid]
    references = [task.tokenizer.join(task.tokenizer.split(target)) for _, target in valid]
    greedy_match, greedy_texts = evaluation.exact_match(model, task, valid)
    # Beam search keeps the BEAM_SIZE most probable partial translations at
    # every step instead of only the best one.
    beam_match, beam_texts = evaluation.exact_match(model, task, valid, beam_size=BEAM_SIZE)

    print(f"\nheld-out results after {trainer.step} steps, {len(valid)} sentences:")
    for label, match, texts in (("greedy", greedy_match, greedy_texts),
                                (f"beam size {BEAM_SIZE}", beam_match, beam_texts)):
        bleu = evaluation.corpus_bleu(texts, references)  # 0 to 100, by sacrebleu
        print(f"  {label:<12} exact match {match:6.1%}   BLEU {bleu:5.1f}")

    print("\nsamples (greedy):")
    for source, output, reference in list(zip(sources, greedy_texts, references))[:SAMPLES]:
        print(f"  {'ok ' if output == reference else 'BAD'} {source}\n      -> {output}")
        if output != reference:
            print(f"      expected {reference}")

    figures = trainer.save_plots()  # loss.png and lr.png
    attention_path = os.path.join(OUT_DIR, "attention.png")
    figures.append(save_cross_attention(model, task, sources[0], attention_path))
    print("\nfigures:", ", ".join(figures))


if __name__ == "__main__":
    main()
