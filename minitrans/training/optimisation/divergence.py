"""When a finite loss says the run has diverged.

A learning rate far too large can throw the weights so far that the loss
climbs to 1e15 and stays there, finite: the non-finite check never fires,
and the run would go on and save weights that predict nothing. The rule:

    the run has diverged when the mean loss of the last WINDOW steps (of all
    steps so far, before step WINDOW) is more than FACTOR times the loss of
    step 1.

Why this rule:

* The loss of step 1 is the untrained model's, close to ln(vocabulary size)
  (its outputs are nearly uniform, and the cross-entropy of any target with
  a uniform prediction is ln V). It depends on nothing the run has done, so
  a run that explodes from its first update is still measured against a
  sane level (a mean of the first ten steps would include the explosion).
* Training lowers the loss: in the default runs of copy, reverse, translate
  and lm no mean of ten steps rose above 0.94 times the loss of step 1 (no
  single step above 1.02 times). A mean four times ln V means the model
  puts, on average, probability e^(-4 ln V) = V^-4 on the right tokens:
  confidently wrong, not learning slowly.
* The mean of ten steps lets one unlucky batch pass, and reacts within a
  step to a loss of 1e15: one such step lifts the mean by 1e14. From step 2
  on, so that a run thrown off by its first updates stops before its first
  checkpoint (at step 2 the rule asks for a loss 7 times that of step 1).
* The trainer checks each step's loss before the step's update; the loss of
  a step measures the weights of the update before, so the last update is
  still unchecked when an evaluation comes. The same rule is therefore
  applied to the held-out loss of the weights about to be saved, before
  any save (``held_out_divergence``): a diverged state is never written
  over the last good checkpoint, and never becomes ``best.npz``. A healthy
  model cannot trip it through over-fitting alone: with label smoothing
  (0.1 by default) the loss of a confidently wrong token is bounded by
  about ln V + ln(1 / 0.1), far below four times ln V once V > 4; a
  diverged one sits at 1e7 and beyond.
"""

import math

WINDOW = 10
FACTOR = 4.0


def divergence(earlier, loss, window=WINDOW, factor=FACTOR):
    """Why the run has diverged, as a phrase, or None while it has not.

    Inputs: ``earlier``, the losses of the steps so far (step 1 first);
    ``loss``, the loss of the step under way."""
    if not earlier or not earlier[0] > 0:
        return None
    last = earlier[-(window - 1) :] + [loss]
    recent = math.fsum(last) / len(last)
    if recent > factor * earlier[0]:
        return (
            f"the loss diverged: the mean of the last {len(last)} steps, {recent:.4g}, is more "
            f"than {factor:g} times the loss of step 1, {earlier[0]:.4g}"
        )
    return None


def held_out_divergence(earlier, held_out_loss, factor=FACTOR):
    """Why the weights an evaluation measured have diverged, as a phrase, or
    None while they have not: their held-out loss is not finite, or more
    than ``factor`` times the (training) loss of step 1, ``earlier[0]``."""
    if not earlier or not earlier[0] > 0:
        return None
    if not math.isfinite(held_out_loss):
        return f"the held-out loss is {held_out_loss}: the weights have diverged"
    if held_out_loss > factor * earlier[0]:
        return (
            f"the weights diverged: their held-out loss, {held_out_loss:.4g}, is more than "
            f"{factor:g} times the loss of step 1, {earlier[0]:.4g}"
        )
    return None
