"""Execute the lessons and store them as notebooks with their outputs.

Each lesson is written as a plain-text Python file in jupytext's "percent"
format (``# %%`` starts a code cell, ``# %% [markdown]`` a text cell), which
reads well in a diff. This script runs each one top to bottom in a fresh
kernel, in this folder, and writes the paired ``.ipynb`` with its outputs and
figures, so that the course can be read on a code-hosting site without
running anything.

    python lessons/build.py                 # every lesson
    python lessons/build.py 05 07           # lessons whose name starts with 05 or 07

Needs ``pip install ".[dev]"`` (jupytext, nbclient, ipykernel).
"""

import pathlib
import sys
import tempfile
import time

import jupytext
import nbclient
from jupyter_client.manager import KernelManager

LESSONS = pathlib.Path(__file__).resolve().parent
TIMEOUT = 300  # seconds per cell


def lesson_sources(prefixes=()):
    """The lesson files, in course order, optionally only those whose name
    starts with one of ``prefixes``."""
    sources = sorted(p for p in LESSONS.glob("[0-9][0-9]_*.py"))
    return [p for p in sources if not prefixes or p.name.startswith(tuple(prefixes))]


def execute(source):
    """Run a lesson in a fresh kernel; returns the executed notebook."""
    notebook = jupytext.read(source)
    notebook.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    # Talk to the kernel over local sockets (IPC), not TCP ports: no port can
    # be taken by another kernel starting at the same moment.
    with tempfile.TemporaryDirectory() as sockets:
        manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(pathlib.Path(sockets) / "kernel"))
        client = nbclient.NotebookClient(notebook, km=manager, timeout=TIMEOUT,
                                         resources={"metadata": {"path": str(LESSONS)}})
        client.execute()
    return notebook


def main(prefixes):
    for source in lesson_sources(prefixes):
        start = time.perf_counter()
        notebook = execute(source)
        target = source.with_suffix(".ipynb")
        jupytext.write(notebook, target, fmt="ipynb")
        size = target.stat().st_size / 1e6
        print(f"{source.name}: {time.perf_counter() - start:.1f} s, {target.name} {size:.2f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
