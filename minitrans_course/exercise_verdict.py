"""How a checker's verdict is shown: printed, or in a notebook, with its hint
folded away.

Many hints give the solution away (the formulas of a backward, the NumPy
calls that do it), and a lesson's stored notebook shows its exercise's
skeleton failing. In a notebook (Jupyter, and the course's website, which
shows the stored outputs) the verdict is therefore displayed as HTML with
the hint inside a closed ``<details>`` block, opened by a click; the plain
text of the same output, for whatever shows no HTML, and the printed verdict
outside a notebook keep the hint in full.
"""

import html

HINT_SUMMARY = "Hint (it may give the solution away: try first)"


def show(result):
    """Print the verdict of ``result`` (an ExerciseResult), or display it in a
    notebook with its hint folded."""
    text = f"{result.name}: {result.message} (relative error {result.rel_error:.1e})"
    display = _notebook_display()
    if display is None or not result.hint:
        print(text)
        return
    display({"text/plain": text, "text/html": as_html(result)}, raw=True)


def as_html(result):
    """The verdict without its hint, then the hint in a closed <details> block."""
    verdict = result.message.split(" Hint: ", 1)[0]
    first = f"{result.name}: {verdict} (relative error {result.rel_error:.1e})"
    return (f'<pre style="white-space: pre-wrap">{html.escape(first)}</pre>\n'
            f"<details><summary>{html.escape(HINT_SUMMARY)}</summary>\n"
            f'<pre style="white-space: pre-wrap">{html.escape(result.hint)}</pre>\n'
            "</details>")


def _notebook_display():
    """IPython's display function inside an IPython shell (a notebook's
    kernel, or IPython in a terminal, which shows the plain text), else None."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # the course's kit runs without IPython
        return None
    return display if get_ipython() is not None else None
