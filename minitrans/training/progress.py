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
