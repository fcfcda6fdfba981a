"""The progress bar of a training run, and printing around it."""


def progress_bar(total, initial, enabled):
    """tqdm's bar (a widget in a notebook), or a silent stand-in."""
    if enabled:
        from tqdm.auto import tqdm
    else:  # plain tqdm: no notebook-widget import, nothing printed
        from tqdm import tqdm
    return tqdm(total=total, initial=initial, disable=not enabled, unit="step")


def through(bar, log):
    """Print through tqdm so that messages do not break the progress bar."""
    if bar.disable:
        return log
    return lambda message: bar.write(message)


class TrainingLine:
    """Where there is no bar (standard error is not a terminal: a log file,
    a pipe), the bar's numbers as a line per evaluation instead:

        step 200: training loss 1.2345, lr 1.23e-03, 12,345 tok/s

    The loss is the mean of the steps since the last line and tok/s counts
    their target tokens over their time, so a line sums up its interval."""

    def __init__(self):
        self.losses, self.tokens, self.seconds = [], 0, 0.0

    def add(self, loss, tokens, seconds):
        self.losses.append(loss)
        self.tokens += tokens
        self.seconds += seconds

    def line(self, step, lr):
        """The line of the steps added since the last call, which starts a new interval."""
        loss = sum(self.losses) / max(len(self.losses), 1)
        rate = self.tokens / max(self.seconds, 1e-9)
        self.__init__()
        return f"step {step}: training loss {loss:.4f}, lr {lr:.2e}, {rate:,.0f} tok/s"
