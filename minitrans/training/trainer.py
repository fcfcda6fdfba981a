"""The training loop, one for every run: steps, evaluations, checkpoints, resume.

One step: take the step's batch, forward, label-smoothed loss, backward (on
the CPU each half of the batch on a thread of its own:
``training.optimisation.parallel``), clip the global gradient norm, stop if
anything is not finite, update with the optimiser at the scheduled learning
rate. Every ``eval_every`` steps: the held-out evaluation, a checkpoint (and
``best.npz`` when the evaluation is the best so far), and an early stop
where the run's rules say. A loss far above its level at step 1, although
finite, stops the run too, and so does a held-out loss far above it, before
the weights it measured are saved (``training.optimisation.divergence``): a
diverged state never replaces the last good checkpoint.

Which optimiser and schedule, what an evaluation measures, which one is
best, when to stop and what the checkpoint records are the run's recipe
(``training.recipe``): by default the paper's (Adam with its warm-up
schedule, held-out exact match, ``training.optimisation.stopping``);
fine-tuning gives its own (``training.finetune``).

While ``fit`` runs it holds the lock of its folder (``training.run_files.run_folder``:
a second trainer there is refused), and Ctrl-C saves the checkpoint of the
last completed step before stopping (``training.run_files.interrupt``). The trainer
writes where its config's ``out_dir`` says; refusing a folder that holds
another run's checkpoint is the command line's policy.

Everything random in a step (which examples, which dropout masks) is derived
from (seed, step), so a run resumed from a checkpoint repeats exactly the
losses of an uninterrupted run.
"""

import dataclasses
import math
import os
import time

from minitrans.core import backend, checks
from minitrans.layers.dropout import Dropout
from minitrans.layers.loss import LabelSmoothedCrossEntropy
from minitrans.training.optimisation import evaluation
from minitrans.training.optimisation.averaging import WeightAverage
from minitrans.training.optimisation.clipping import clip_grad_norm
from minitrans.training.optimisation.divergence import divergence, held_out_divergence
from minitrans.training.optimisation.parallel import DataParallel
from minitrans.training.recipe import PaperRecipe
from minitrans.training.run_files import checkpoint, interrupt, run_folder, trainer_checkpoint
from minitrans.training.run_files.progress import TrainingLine, progress_bar, through
from minitrans.training.train_config import TrainConfig  # noqa: F401 (re-exported)


class TrainingError(RuntimeError):
    """Training cannot go on (a loss or gradient that is not finite, or a
    diverged loss)."""


class Trainer:
    """Trains ``model`` on ``task`` as ``config`` says, by ``recipe`` (default:
    the paper's, ``training.recipe.PaperRecipe``); ``fit()`` runs it."""

    def __init__(self, model, task, config, log=print, progress=True, recipe=None):
        self.model, self.task, self.config = model, task, config
        self.log, self.progress = log, progress
        self.recipe = PaperRecipe() if recipe is None else recipe
        self.optimizer = self.recipe.optimizer(model, config)
        self.loss_fn = LabelSmoothedCrossEntropy(config.label_smoothing, pad_id=model.config.pad_id)
        self.parallel = DataParallel(model, self.loss_fn, config.workers)
        # the weights' moving average, which evaluations measure (training.optimisation.averaging)
        self.average = WeightAverage(model, config.average_decay) if config.average_decay else None
        self.step = 0
        self.history = {"step": [], "loss": [], "lr": [], "grad_norm": []}
        self.evaluations = []
        self.checkpoint_path = os.path.join(config.out_dir, "checkpoint.npz")
        self.last_good = None  # the checkpoint this run last wrote or resumed from

    # ------------------------------------------------------------ one step

    def learning_rate(self, step):
        """The learning rate of ``step`` (1, 2, ...), by the recipe."""
        return self.recipe.learning_rate(step, self.model, self.config)

    def batch_pairs(self, step):
        """The training pairs of ``step``: epoch after epoch, each a fresh
        permutation seeded by (seed, epoch), so any step can be recreated."""
        pairs = self.task.train
        size = min(self.config.batch_size, len(pairs))
        per_epoch = len(pairs) // size
        epoch, index = divmod(step - 1, per_epoch)
        order = backend.host_rng((self.config.seed, epoch)).permutation(len(pairs))
        return [pairs[i] for i in order[index * size:(index + 1) * size]]

    def next_batch(self, step):
        """The Batch of ``step``: its pairs (``batch_pairs``), made into a batch
        (a text's trainer draws windows instead: ``training.text_recipe``)."""
        return self.task.make_batch(self.batch_pairs(step))

    def train_step(self):
        step = self.step + 1
        for module in self.parallel.modules():  # the model's and its replicas'
            if isinstance(module, Dropout):
                module.reset_rng(step)  # this step's masks, whatever came before
        batch = self.next_batch(step)
        self.optimizer.zero_grad()
        try:  # forward, loss and backward, the batch split over the workers
            loss = float(
                self.parallel.forward_backward(evaluation.model_inputs(batch), batch.tgt_out)
            )
        except checks.NonFiniteError as error:  # a layer met NaN or infinity inside the model
            culprit = self._non_finite_parameter()
            where = f"parameter {culprit} holds NaN or infinity" if culprit else str(error)
            raise TrainingError(f"step {step}: inside the model, {where}; training stopped, "
                                f"{self._last_good()}") from None
        norm = clip_grad_norm(self.optimizer, self.config.clip_norm or None)
        if not (math.isfinite(loss) and math.isfinite(norm)):
            # the model checks its ids, not every layer's input (a wait for the GPU
            # each): a NaN weight shows here first, so look for it now
            culprit, where = self._non_finite_parameter(), ""
            if culprit:
                where = f": inside the model, parameter {culprit} holds NaN or infinity"
            raise TrainingError(
                f"step {step}: the loss ({loss}) or the gradient norm ({norm}) is not finite"
                f"{where}; training stopped, {self._last_good()}"
            )
        diverged = divergence(self.history["loss"], loss)
        if diverged:  # stop before this step's update, and before any save
            raise TrainingError(f"step {step}: {diverged}; training stopped, "
                                f"{self._last_good()}")
        lr = self.learning_rate(step)
        self.optimizer.step(lr)
        if self.average is not None:
            self.average.update(self.optimizer.step_count)
        self.step = step
        for key, value in (("step", step), ("loss", loss), ("lr", lr), ("grad_norm", norm)):
            self.history[key].append(value)
        return loss, batch.num_tokens

    # ------------------------------------------------------------ the loop

    def fit(self, steps=None):
        """Train until ``steps`` (default: the config's) or the target exact
        match; returns the last evaluation (a dict). Calling it again with a
        larger ``steps`` continues the same run.

        Holds the lock of ``out_dir`` throughout (FolderInUseError if another
        trainer holds it). Ctrl-C ends the step under way, saves the
        checkpoint and raises ``interrupt.TrainingInterrupted`` (a
        KeyboardInterrupt) naming it."""
        if steps is not None:
            self.config = dataclasses.replace(self.config, steps=steps)
        if self.step >= self.config.steps:  # nothing left to train: report where it stands
            return self.evaluate()
        with run_folder.RunLock(self.config.out_dir, self.log):
            with interrupt.deferred_sigint() as sigint:
                return self._train(sigint)

    def _train(self, sigint):
        """The loop of ``fit``, with the folder locked and Ctrl-C deferred to
        ``sigint.requested``."""
        leftovers = checkpoint.remove_unfinished(self.checkpoint_path)  # no one else saves here
        if leftovers:
            self.log(
                f"removed {len(leftovers)} unfinished checkpoint file(s) of an interrupted save: "
                f"{', '.join(leftovers)}"
            )
        bar = progress_bar(self.config.steps, self.step, self.progress)
        log = through(bar, self.log)
        last, saved = None, None
        interval = TrainingLine()  # without a bar: a line per evaluation
        started = time.perf_counter()
        try:
            while self.step < self.config.steps:
                start = time.perf_counter()
                loss, tokens = self.train_step()
                seconds = time.perf_counter() - start
                rate = tokens / max(seconds, 1e-9)
                bar.update(1)
                bar.set_postfix(
                    loss=f"{loss:.3f}", lr=f"{self.history['lr'][-1]:.2e}", tok_s=f"{rate:,.0f}"
                )
                interval.add(loss, tokens, seconds)
                if self.step % self.config.eval_every == 0 or self.step == self.config.steps:
                    if bar.disable:
                        log(interval.line(self.step, self.history["lr"][-1]))
                    last, saved = self.evaluate_and_save(log), self.step
                    minutes = (time.perf_counter() - started) / 60
                    reason = self.stop_reason(minutes)
                    if reason:
                        log(f"step {self.step}: {reason}")
                        break
                if sigint.requested:  # Ctrl-C: the step is complete, save it and stop
                    if saved != self.step:
                        self._refuse_diverged(self.teacher_forced_metrics()["loss"])
                        self.save(self.checkpoint_path)
                    raise interrupt.TrainingInterrupted(self.step, self.checkpoint_path)
        finally:
            bar.close()
        return last

    def stop_reason(self, minutes):
        """Why the run stops after the evaluation just made, or None (by the
        recipe); ``minutes``: how long this ``fit`` has trained."""
        return self.recipe.stop_reason(self.config, self.evaluations, minutes)

    def evaluate_and_save(self, log=None):
        """Evaluate, save the checkpoint, and save it as ``best.npz`` too when
        the evaluation is the best so far (the recipe's ``best``: of equals,
        the earlier one is kept, fewer steps for the same score)."""
        metrics = self.evaluate()
        self._refuse_diverged(metrics["loss"])  # before anything is saved
        self.evaluations.append(metrics)
        (log or self.log)(f"step {self.step}: {self.recipe.describe(metrics, self.task)}")
        self.save(self.checkpoint_path)
        if self.best_evaluation() is metrics:
            self.save(self.best_checkpoint_path())
        return metrics

    def best_checkpoint_path(self):
        """``best.npz`` beside the checkpoint: the evaluation of highest
        held-out exact match so far."""
        return os.path.join(os.path.dirname(self.checkpoint_path), "best.npz")

    def best_evaluation(self):
        """The evaluation that ``best.npz`` holds (the recipe's ``best``), or
        None before the first."""
        return self.recipe.best(self.evaluations)

    @property
    def evaluated_model(self):
        """The model that evaluations measure, ``best.npz`` keeps and a user
        decodes with: the weights' moving average where the config asks for
        one (``average_decay``; ``training.optimisation.averaging``), else the model."""
        return self.model if self.average is None else self.average.model

    def evaluate(self):
        """The held-out metrics of the evaluated model at this step (a dict)."""
        return {"step": self.step,
                **self.recipe.evaluate(self.evaluated_model, self.task, self.config)}

    def held_out_pairs(self):
        """The held-out examples an evaluation measures."""
        return self.recipe.held_out(self.task, self.config)

    def teacher_forced_metrics(self, model=None):
        """Held-out metrics by teacher forcing, "loss" among them, of
        ``model``, by default the evaluated one."""
        model = self.evaluated_model if model is None else model
        return self.recipe.teacher_forced_metrics(model, self.task, self.config)

    def save_plots(self):
        """loss.png and lr.png in the run's folder; returns their paths."""
        from minitrans.training.run_files import plots

        return plots.save_run_plots(self)

    def _non_finite_parameter(self):
        """The name of the first parameter with a NaN or infinite entry, or None."""
        for name, value, _ in self.model.named_parameters():
            if not checks.is_finite(value):
                return name
        return None

    def _last_good(self):
        """Where the last good state of this run is, as a clause."""
        if self.last_good is None:
            return "and no checkpoint holds a good state of this run (none was written yet)"
        return f"the last good checkpoint is {self.last_good}"

    def _refuse_diverged(self, held_out_loss):
        """Raise TrainingError, before anything is saved, when ``held_out_loss``
        (the evaluated model's) says the weights have diverged
        (``divergence.held_out_divergence``). With an average, the weights
        being trained are saved too, so their own held-out loss is checked as well:
        the average trails them and would show a divergence only later."""
        losses = [held_out_loss]
        if self.average is not None:
            losses.append(self.teacher_forced_metrics(self.model)["loss"])
        for loss in losses:
            diverged = held_out_divergence(self.history["loss"], loss)
            if diverged:
                raise TrainingError(f"step {self.step}: {diverged}; training stopped and this "
                                    f"state not saved, {self._last_good()}")

    # ------------------------------------------------------------ checkpoints

    def save(self, path):
        """Parameters, Adam's moments and step, and the recipe's records
        (configs, vocabulary, history: ``training.run_files.trainer_checkpoint``)."""
        try:
            trainer_checkpoint.save(self, path, self.recipe.records(self))
        except OSError as error:  # a full disk, say: the file before is still whole
            reason = error.strerror or str(error)
            raise TrainingError(f"step {self.step}: could not write {path}: {reason}; "
                                f"training stopped, {self._last_good()}") from None
        if os.path.abspath(path) == os.path.abspath(self.checkpoint_path):
            self.last_good = path

    def restore(self, path, arrays, records):
        """Load what ``save`` wrote into this trainer (same model shapes)."""
        trainer_checkpoint.restore(self, path, arrays, records)
