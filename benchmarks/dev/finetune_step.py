"""How long one fine-tuning step of GPT-2 small takes here: a random
minitrans model of its shape (d_model 768, 12 heads, 12 layers, vocab
50257, 1024 learned positions, GELU, pre-norm, tied embeddings), trained by
the same FinetuneTrainer as ``minitrans train --init-from`` (forward,
backward by hand, clipping, Adam) on batches of --batch-size blocks of
--block-size tokens.

    python benchmarks/dev/finetune_step.py [--steps 3] [--batch-size 1] [--block-size 128]

Prints each step's seconds and their median (the first step, which
allocates Adam's moments, included in the list, left out of the median).
"""

import argparse
import statistics
import tempfile
import time

import numpy as np

import minitrans
from minitrans.model.config import ModelConfig
from minitrans.model.language_model import DecoderOnlyLM
from minitrans.training.finetune import TextBlocks
from minitrans.training.finetune import FinetuneTrainer
from minitrans.training.train_config import TrainConfig

GPT2_SMALL = dict(vocab_size=50257, d_model=768, h=12, N=12, d_ff=3072, max_len=1024,
                  positions="learned", activation="gelu", norm="layer", pre_norm=True,
                  tie_embeddings=True, decoder_only=True, dropout=0.0, pad_id=None,
                  output_bias=False, scale_embedding=False, bias=True)


def main(argv=None, shape=None):
    """Time the steps; ``shape``: the model's sizes (default GPT2_SMALL)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=128)
    args = parser.parse_args(argv)
    shape = shape or GPT2_SMALL
    with minitrans.using("numpy", dtype="float32"), tempfile.TemporaryDirectory() as out:
        model = DecoderOnlyLM(ModelConfig(**shape), rng=0)
        rng = np.random.default_rng(0)
        blocks = [rng.integers(0, shape["vocab_size"], args.block_size + 1)
                  for _ in range(4 * args.batch_size)]
        task = TextBlocks("pretrained", "pretrained-lm", blocks, blocks[:1], args.block_size,
                          "random tokens")
        config = TrainConfig(task="pretrained", steps=args.steps, batch_size=args.batch_size,
                             warmup=1, eval_every=args.steps, workers=min(2, args.batch_size),
                             out_dir=out)
        trainer = FinetuneTrainer(model, task, config, lr=5e-5, log=lambda message: None,
                                  progress=False)
        print(f"model: {model.num_parameters():,} parameters; batch "
              f"{args.batch_size} x {args.block_size} tokens, workers {config.workers}")
        seconds = []
        for _ in range(args.steps):
            start = time.perf_counter()
            trainer.train_step()
            seconds.append(time.perf_counter() - start)
            print(f"step {trainer.step}: {seconds[-1]:.2f} s", flush=True)
    rest = seconds[1:] or seconds
    print(f"median step (after the first): {statistics.median(rest):.2f} s")


if __name__ == "__main__":
    main()
