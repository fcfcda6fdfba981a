"""What a kind of training run decides, given to the one loop they share.

Every run trains with the same loop (``training.trainer.Trainer``): take a
batch, forward, backward, clip, update; every ``eval_every`` steps evaluate,
refuse diverged weights, save the checkpoint (and ``best.npz``), perhaps
stop. What differs between training from scratch and fine-tuning a
pretrained model is a recipe, an object with these methods:

    optimizer(model, config)        the optimiser, with its settings
    learning_rate(step, model, config)
                                    the learning rate of step 1, 2, ...
    held_out(task, config)          the held-out examples an evaluation measures
    teacher_forced_metrics(model, task, config)
                                    held-out metrics by teacher forcing, at
                                    least "loss" (which the divergence checks read)
    evaluate(model, task, config)   every held-out metric of an evaluation (a dict)
    describe(metrics, task)         an evaluation in words, for the log
    best(evaluations)               the best of the evaluations, which ``best.npz`` keeps
    stop_reason(config, evaluations, minutes)
                                    why the run stops after its last evaluation, or None
    records(trainer)                the JSON records of the trainer's checkpoint

``PaperRecipe`` is the paper's way, the default: Adam with beta2 = 0.98 and
the warm-up schedule of §5.3, and held-out exact match as the measure of a
model. ``training.finetune.FineTuningRecipe`` and ``training.text_recipe.GPTRecipe``
share ``LowestLossRecipe``'s measure: the lowest held-out loss.
"""

from minitrans.training.optimisation import evaluation, stopping
from minitrans.training.optimisation.adam import Adam
from minitrans.training.optimisation.schedule import transformer_lr
from minitrans.training.run_files import trainer_checkpoint


class PaperRecipe:
    """Training from scratch as the paper does, on a task with answers to
    match (translation, copying, the toy language tasks):

    optimiser       Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9 (§5.3);
                    AdamW with the config's ``weight_decay``
    learning rate   the paper's warm-up then inverse square root
                    (``optimisation.schedule.transformer_lr``), times ``lr_factor``
    evaluation      held-out loss and token accuracy by teacher forcing, and
                    exact match by greedy decoding, on the first
                    ``eval_pairs`` held-out pairs; ``best.npz`` keeps the
                    highest exact match (a tie keeps the earlier: fewer steps)
    stopping        ``optimisation.stopping``: the target exact match,
                    patience, or the time budget
    checkpoint      ``run_files.trainer_checkpoint.records_of``, with the
                    vocabulary, so that a run can be resumed and translate
    """

    def optimizer(self, model, config):
        return Adam(model, betas=(0.9, 0.98), eps=1e-9, weight_decay=config.weight_decay)

    def learning_rate(self, step, model, config):
        return transformer_lr(step, model.config.d_model, config.warmup, config.lr_factor)

    def held_out(self, task, config):
        return task.valid[: config.eval_pairs]

    def teacher_forced_metrics(self, model, task, config):
        """Held-out loss, token accuracy and objective (``evaluation.teacher_forced_metrics``)."""
        return evaluation.teacher_forced_metrics(model, task, self.held_out(task, config),
                                                 label_smoothing=config.label_smoothing)

    def evaluate(self, model, task, config):
        pairs = self.held_out(task, config)
        metrics = self.teacher_forced_metrics(model, task, config)
        metrics["exact_match"], _ = evaluation.exact_match(model, task, pairs)
        return {"pairs": len(pairs), **metrics}

    def describe(self, metrics, task):
        return (f"held-out loss {metrics['loss']:.4f}, token accuracy "
                f"{metrics['token_accuracy']:.1%}, exact match {metrics['exact_match']:.1%} "
                f"({metrics['pairs']} pairs)")

    def best(self, evaluations):
        """The earliest evaluation of highest exact match, or None before the first."""
        return max(evaluations, key=lambda e: e["exact_match"], default=None)

    def stop_reason(self, config, evaluations, minutes):
        return stopping.stop_reason(config, evaluations, minutes)

    def records(self, trainer):
        return trainer_checkpoint.records_of(trainer)


class LowestLossRecipe:
    """What the recipes of a language model's runs decide alike (fine-tuning
    a pretrained model, training a GPT on a text): the best evaluation is
    the one of lowest held-out loss, and a run stops after its steps or
    once its time budget is spent (no exact match to reach)."""

    def best(self, evaluations):
        """The earliest evaluation of lowest held-out loss, or None before the first."""
        return min(evaluations, key=lambda e: e["loss"], default=None)

    def stop_reason(self, config, evaluations, minutes):
        if config.max_minutes is not None and minutes >= config.max_minutes:
            return f"the time budget of {config.max_minutes:g} minutes is spent, stopping"
        return None
