"""When a run stops before its last step: after an evaluation, once held-out
exact match reaches the target, once it has stopped improving, or once the
time budget is spent. A run always stops at an evaluation, so the state it
ends on has been measured and saved.

Why patience: a corpus harder than the ones the defaults were tuned on needs
more steps, an easier one fewer, and nobody knows beforehand which. Held-out
exact match says it: while it still rises, training helps; once ``patience``
evaluations in a row bring nothing above the best so far, the run has learned
what it will learn at this learning rate, and ``best.npz`` keeps the best.
"""


def evaluations_since_best(evaluations):
    """How many evaluations came after the first one of highest exact match."""
    scores = [e["exact_match"] for e in evaluations]
    return len(scores) - 1 - scores.index(max(scores))


def stop_reason(config, evaluations, minutes):
    """Why the run stops after its last evaluation, as a phrase, or None to
    go on. Inputs: a TrainConfig, the run's evaluations (dicts with "step"
    and "exact_match", the last one just made), and the minutes this call of
    ``fit`` has trained."""
    last = evaluations[-1]
    if last["exact_match"] >= config.target_exact_match:
        return f"reached exact match {last['exact_match']:.1%}, stopping early"
    if config.patience is not None and evaluations_since_best(evaluations) >= config.patience:
        best = max(evaluations, key=lambda e: e["exact_match"])
        return (f"held-out exact match has not improved for {config.patience} evaluations "
                f"(best {best['exact_match']:.1%} at step {best['step']}), stopping early")
    if config.max_minutes is not None and minutes >= config.max_minutes:
        return f"the time budget of {config.max_minutes:g} minutes is spent, stopping"
    return None


def describe(config):
    """The stopping rules of ``config`` in words, for the first line of a run."""
    rules = [f"at most {config.steps} steps"]
    if config.max_minutes is not None:
        rules.append(f"{config.max_minutes:g} minutes")
    text = f"training for {' or '.join(rules)}, evaluating every {config.eval_every}"
    stops = []
    if config.target_exact_match <= 1:
        stops.append(f"held-out exact match reaches {config.target_exact_match:.0%}")
    if config.patience is not None:
        stops.append(f"it has not improved for {config.patience} evaluations "
                     f"({config.patience * config.eval_every} steps)")
    return text + (f"; stops early once {' or once '.join(stops)}" if stops else "")
