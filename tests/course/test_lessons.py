"""The lessons: every one runs top to bottom (two at a time, each in a kernel
of its own, which stops when its lesson ends), and the committed notebooks
are the executed, up-to-date versions of their plain-text sources.

A lesson that imports PyTorch is run only where PyTorch is installed; its
committed notebook is checked everywhere (that needs no PyTorch)."""

import concurrent.futures
import importlib.util
import os
import pathlib
import re

import pytest
from tests.conftest import load_module

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
jupytext = pytest.importorskip(
    "jupytext", reason="the lesson tests need the dev extra (jupytext, nbclient)"
)
pytest.importorskip("nbclient", reason="the lesson tests need the dev extra (nbclient)")


build = load_module(LESSONS / "build.py", "lessons_build")
SOURCES = build.lesson_sources()

# "import torch", "from torch import ..." or "from minitrans.interop.torch import ..." on a line
# of code
_IMPORTS_TORCH = re.compile(
    r"^[ \t]*(import torch\b|from (torch|minitrans\.interop\.torch)\b)", re.MULTILINE
)
# find_spec, not import: collecting the tests should not pay for loading PyTorch
TORCH_MISSING = importlib.util.find_spec("torch") is None


def needs_torch(source):
    """Whether the lesson source imports PyTorch (itself or through minitrans.interop.torch)."""
    return _IMPORTS_TORCH.search(source.read_text(encoding="utf-8")) is not None


def runnable(sources):
    """The sources as test parameters, a lesson that needs PyTorch skipped where it is missing."""
    skip = pytest.mark.skip(reason="PyTorch is not installed: pip install \".[torch]\"")
    return [pytest.param(s, id=s.stem, marks=[skip] if TORCH_MISSING and needs_torch(s) else [])
            for s in sources]


def test_there_are_lessons():
    assert SOURCES, "no lessons/NN_*.py found"


@pytest.mark.parametrize("source", SOURCES, ids=[s.stem for s in SOURCES])
def test_the_committed_notebook_is_the_executed_source(source):
    notebook_path = source.with_suffix(".ipynb")
    assert notebook_path.exists(), f"run: python lessons/build.py {source.name[:2]}"
    assert notebook_path.stat().st_size < 1_000_000, f"{notebook_path.name} is over 1 MB"
    notebook = jupytext.read(notebook_path)
    expected = jupytext.read(source)
    cells = [(c.cell_type, c.source.strip()) for c in notebook.cells]
    assert cells == [(c.cell_type, c.source.strip()) for c in expected.cells], (
        f"{notebook_path.name} is out of date: python lessons/build.py {source.name[:2]}")
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(
        range(1, len(code) + 1)
    ), "not executed in order"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{notebook_path.name} was saved with an error: {errors[0].get('ename')}"


# Each lesson runs in a kernel of its own, a process, so two can run at once:
# on two cores the lessons took 85 s instead of 156 one after the other.
LANES = 2


@pytest.fixture(scope="module")
def lesson_runs(request):
    """{source: future of its executed notebook} for the lessons this pytest run
    runs (those selected, and not skipped for want of PyTorch), in the tests'
    order, LANES at a time: each test waits for its own lesson."""
    selected = [item.callspec.params["source"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_the_lesson_runs_top_to_bottom"
                and item.get_closest_marker("skip") is None]
    pool = concurrent.futures.ThreadPoolExecutor(LANES, thread_name_prefix="lesson")
    yield {source: pool.submit(build.execute, source) for source in selected}
    pool.shutdown(cancel_futures=True)  # after a failure with -x, the rest need not run


@pytest.mark.parametrize("source", runnable(SOURCES))
def test_the_lesson_runs_top_to_bottom(source, lesson_runs):
    notebook = lesson_runs[source].result()  # raises CellExecutionError on any error
    assert any(c.cell_type == "code" and c.outputs for c in notebook.cells)


def test_a_lesson_leaves_no_kernel_running(tmp_path):
    """The kernel stops when its lesson ends, not with the process that ran it."""
    source = tmp_path / "99_kernel.py"
    source.write_text("# %%\nimport os\nprint(os.getpid())\n", encoding="utf-8")
    kernel = int(build.execute(source).cells[0].outputs[0]["text"])
    with pytest.raises(ProcessLookupError):
        os.kill(kernel, 0)  # signal 0 only asks whether the process exists


def test_the_table_of_contents_lists_every_lesson():
    contents = (LESSONS / "README.md").read_text(encoding="utf-8")
    for source in SOURCES:
        assert (
            source.with_suffix(".ipynb").name in contents
        ), f"{source.stem} is missing from lessons/README.md"


def test_lessons_that_import_torch_are_recognised(tmp_path):
    cases = {
        "import torch\n": True,
        "import torch.nn as nn\n": True,
        "from torch import nn\n": True,
        "    import torch  # inside a function\n": True,
        "from minitrans.interop.torch import to_torch\n": True,
        "import numpy as np\n": False,
        "import torchvision\n": False,
        "# `import torch` in a markdown cell\n": False,
        "x = 1  # see import torch\n": False,
    }
    for text, expected in cases.items():
        path = tmp_path / "NN_lesson.py"
        path.write_text(text, encoding="utf-8")
        assert needs_torch(path) is expected, text
