"""Interactive figures that need no kernel: a slider (or a menu) over
precomputed arrays, drawn by a few lines of inline JavaScript.

A ``SliderFigure`` holds a grid of control values and, for every point of
that grid, a frame: the arrays minitrans computed for it (bars, lines, or a
heat map). ``to_html()`` writes ONE self-contained piece of HTML: a
``<div data-interactive>`` with the controls, an inline ``<svg>`` that the
script redraws when a control moves, the frames as embedded JSON, and the
script itself, plain JavaScript with no library and no request to any
other host. Nothing is computed in the browser: moving the slider only picks
another precomputed frame, so the picture is exactly what minitrans computed.

The same HTML works in the static site and in JupyterLab, where the
object's ``_repr_html_`` shows it as a cell's output. JupyterLab runs the
scripts of an output only in a trusted notebook (one you executed yourself,
or trusted with "Trust Notebook"); elsewhere, and in viewers that strip
scripts, the static picture is the fallback: ``save_png(path)`` or
``static()`` draw the figure with matplotlib at three values of the first
control, side by side.

``minitrans_course.interactive_figures`` builds the course's figures with it.
"""

import itertools
import json

from minitrans.core import checks
from minitrans_course.interactive_script import SCRIPT

KINDS = ("bars", "lines", "heatmap")
_COUNTER = itertools.count(1)  # element ids: unique within a page and a kernel


def rounded(values, digits=5):
    """A nested list of floats rounded to ``digits`` significant digits (the
    embedded JSON stays small; a figure cannot show more). Accepts anything
    with ``tolist`` (a NumPy or CuPy array) or a (nested) list."""
    if hasattr(values, "get"):  # a CuPy array: copy to the host first
        values = values.get()
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return [rounded(v, digits) for v in values]
    return float(f"{float(values):.{digits}g}")


class SliderFigure:
    """A figure with one frame per point of a grid of control values.

    Inputs:
    - title: str, shown above the figure
    - controls: list of (label, values) pairs, one per slider (or menu when
      ``menu=True``); values are what the control shows (numbers or strings)
    - frames: list of dicts, one per point of the grid, in C order over the
      controls (the last control varies fastest), each holding
        "series": list of lists of floats, (S, X), for kind "bars" / "lines"
        "matrix", "rows", "cols": (R, C) floats and their labels, for "heatmap"
        "note": optional str shown under the figure (a number worth reading)
    - kind: "bars", "lines" or "heatmap"
    - x: the X labels of the bars or the X coordinates of the lines
    - names: the S series' names (the legend)
    - xlabel, ylabel: axis labels; ylim: (low, high), the same for every frame
      so that a change of frame shows as a change of height (default: the
      range of all the frames)
    - start: index of each control's first value (default: the first)
    - menu: draw the controls as <select> menus rather than sliders
    """

    def __init__(
        self,
        title,
        controls,
        frames,
        kind="bars",
        x=(),
        names=(),
        xlabel="",
        ylabel="",
        ylim=None,
        start=None,
        menu=False,
    ):
        checks.check_choice("kind", kind, KINDS)
        if not controls:
            raise ValueError("controls: expected at least one (label, values) pair, got none")
        sizes = [len(values) for _, values in controls]
        if 0 in sizes:
            raise ValueError(f"controls: expected values for every control, got sizes {sizes}")
        expected = 1
        for size in sizes:
            expected *= size
        if len(frames) != expected:
            raise ValueError(f"frames: expected {expected} (one per grid point), got {len(frames)}")
        start = list(start) if start is not None else [0] * len(controls)
        for (label, values), index in zip(controls, start):
            checks.check_int(f"start of {label}", index, low=0, high=len(values) - 1)
        self.spec = {
            "title": title,
            "kind": kind,
            "controls": [{"label": label, "values": list(values)} for label, values in controls],
            "start": start,
            "menu": bool(menu),
            "x": list(x),
            "names": list(names),
            "xlabel": xlabel,
            "ylabel": ylabel,
            "frames": frames,
        }
        if kind != "heatmap":
            lows_highs = [v for f in frames for s in f["series"] for v in s]
            self.spec["ylim"] = list(ylim) if ylim else [min(0.0, *lows_highs), max(lows_highs)]
        self.id = f"minitrans-figure-{next(_COUNTER)}"

    def frame_index(self, indices):
        """The frame shown when each control is at ``indices`` (C order)."""
        index = 0
        for control, i in zip(self.spec["controls"], indices):
            index = index * len(control["values"]) + i
        return index

    def to_html(self):
        """The figure as one self-contained HTML string (see the module docstring)."""
        # "</" would end the <script> early; "<\/" is the same string in JSON
        data = json.dumps(self.spec, separators=(",", ":")).replace("</", "<\\/")
        parts = [
            f'<div data-interactive id="{self.id}" class="minitrans-figure" '
            'style="font:13px sans-serif;max-width:640px;margin:1em 0">',
            f"<div><b>{_escape(self.spec['title'])}</b></div>",
        ]
        for n, control in enumerate(self.spec["controls"]):
            values, at = control["values"], self.spec["start"][n]
            label = f"<label>{_escape(control['label'])} "
            if self.spec["menu"]:
                options = "".join(
                    f'<option value="{i}"{" selected" * (i == at)}>' f"{_escape(v)}</option>"
                    for i, v in enumerate(values)
                )
                parts.append(f'{label}<select data-control="{n}">{options}</select></label> ')
            else:
                parts.append(
                    f'{label}<input type="range" data-control="{n}" min="0" '
                    f'max="{len(values) - 1}" step="1" value="{at}"> '
                    f"<output>{_escape(values[at])}</output></label> "
                )
        parts += [
            '<div class="minitrans-plot"></div><div class="minitrans-note"></div>',
            f'<script type="application/json">{data}</script>',
            f"<script>({SCRIPT})({json.dumps(self.id)});</script></div>",
        ]
        return "".join(parts)

    def _repr_html_(self):
        return self.to_html()

    def __repr__(self):
        controls = ", ".join(
            f"{c['label']} ({len(c['values'])} values)" for c in self.spec["controls"]
        )
        return f"<interactive figure {self.spec['title']!r}: {controls}>"

    def static(self, pyplot=False):
        """The fallback picture: the figure at the first, middle and last value
        of the first control (the others at their start), side by side, as a
        matplotlib Figure (made with pyplot when ``pyplot``, so a notebook shows it)."""
        first = self.spec["controls"][0]["values"]
        picks = sorted({0, (len(first) - 1) // 2, len(first) - 1})
        try:
            if pyplot:
                import matplotlib.pyplot as plt

                figure = plt.figure(figsize=(4.2 * len(picks), 3.4), layout="constrained")
            else:
                from matplotlib.figure import Figure

                figure = Figure(figsize=(4.2 * len(picks), 3.4), layout="constrained")
        except ImportError:
            raise RuntimeError('figures need matplotlib: pip install "minitrans[train]"') from None
        axes = figure.subplots(1, len(picks), squeeze=False)[0]
        for ax, pick in zip(axes, picks):
            indices = [pick] + self.spec["start"][1:]
            frame = self.spec["frames"][self.frame_index(indices)]
            _draw_frame(ax, self.spec, frame)
            where = ", ".join(
                f"{c['label']} = {c['values'][i]}" for c, i in zip(self.spec["controls"], indices)
            )
            ax.set_title(where + ("\n" + frame["note"] if frame.get("note") else ""), fontsize=8)
        figure.suptitle(self.spec["title"], fontsize=11)
        return figure

    def save_png(self, path):
        """Write the static picture (``static()``) to ``path`` as a PNG."""
        self.static().savefig(path, format="png", dpi=100)


def _escape(value):
    text = str(value)
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _draw_frame(ax, spec, frame):
    """One frame on matplotlib axes: the same picture as the script draws."""
    if spec["kind"] == "heatmap":
        ax.imshow(frame["matrix"], cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(frame["cols"])), frame["cols"], rotation=90, fontsize=7)
        ax.set_yticks(range(len(frame["rows"])), frame["rows"], fontsize=7)
        return
    count = len(frame["series"])
    for n, values in enumerate(frame["series"]):
        name = spec["names"][n] if n < len(spec["names"]) else None
        if spec["kind"] == "bars":
            width = 0.8 / count
            ax.bar(
                [i - 0.4 + (n + 0.5) * width for i in range(len(values))], values, width, label=name
            )
        else:
            ax.plot(spec["x"], values, label=name)
    if spec["kind"] == "bars":
        ax.set_xticks(range(len(spec["x"])), [str(v) for v in spec["x"]], fontsize=7)
    ax.set_ylim(*spec["ylim"])
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel(spec["ylabel"])
    if spec["names"]:
        ax.legend(fontsize=7)
