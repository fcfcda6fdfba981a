"""Execute the lessons and store them as notebooks with their outputs.

Each lesson is written as a plain-text Python file in jupytext's "percent"
format (``# %%`` starts a code cell, ``# %% [markdown]`` a text cell), which
reads well in a diff. This script runs each one top to bottom in a fresh
kernel, in this folder, and writes the paired ``.ipynb`` with its outputs and
figures, so that the course can be read on a code-hosting site without
running anything.

    python lessons/build.py                 # every lesson
    python lessons/build.py 05 07           # lessons whose name starts with 05 or 07
    python lessons/build.py --site [DIR]    # the course as a website, in DIR (build/site)

Running the lessons needs ``pip install ".[dev]"`` (jupytext, nbclient,
ipykernel). The website is made from the stored notebooks, without running
them, and from the user guide's pages (``lessons/guide/``), by Sphinx with the
configuration in ``lessons/site/``; it needs ``pip install ".[site]"``. The
guide's command-line reference is read from the ``minitrans`` parser and its
benchmarks page from the newest files of ``benchmarks/results/``, both at
build time. Then the build's checks read the lesson sources, the READMEs,
the guide and the built pages: ``lessons/site_checks.py`` (a heading lost in a
code cell, a Markdown table shown as a paragraph, a stray ``$`` beside a
formula), ``lessons/site/link_checks.py`` (a broken link or anchor) and
``lessons/site/reference_check.py`` (a command or flag missing from the
reference). The build fails on any, one line each, naming the file.
"""

import importlib.util
import pathlib
import re
import shutil
import sys
import tempfile
import time

LESSONS = pathlib.Path(__file__).resolve().parent
ROOT = LESSONS.parent
SITE_CONFIG = LESSONS / "site"
SITE_DEFAULT = ROOT / "build" / "site"
GUIDE = LESSONS / "guide"
RESULTS = ROOT / "benchmarks" / "results"
TIMEOUT = 300  # seconds per cell
# A link to a lesson notebook in Markdown, "](05_scaled_dot_product_attention.ipynb)": its stem.
LESSON_LINK = re.compile(r"\]\((\d\d_\w+)\.ipynb\)")
# Pages of the site that are not lessons (Markdown in lessons/), under their own sidebar heading.
REFERENCE = ("Reference", ["glossary"])
# The user guide's heading in the sidebar, and a link from its contents to one of its pages.
GUIDE_CAPTION = "User guide"
GUIDE_LINK = re.compile(r"\]\(([\w-]+)\.md(?:#[\w-]*)?\)")


def lesson_sources(prefixes=()):
    """The lesson files, in course order, optionally only those whose name
    starts with one of ``prefixes``."""
    sources = sorted(p for p in LESSONS.glob("[0-9][0-9]_*.py"))
    return [p for p in sources if not prefixes or p.name.startswith(tuple(prefixes))]


def execute(source):
    """Run a lesson in a fresh kernel; returns the executed notebook."""
    # Imported here: building the website needs none of them.
    import jupytext
    import nbclient
    from jupyter_client.manager import KernelManager

    notebook = jupytext.read(source)
    notebook.metadata["jupytext"] = {"formats": "ipynb,py:percent"}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    # Talk to the kernel over local sockets (IPC), not TCP ports: no port can
    # be taken by another kernel starting at the same moment.
    with tempfile.TemporaryDirectory() as sockets:
        manager = KernelManager(kernel_name="python3", transport="ipc",
                                ip=str(pathlib.Path(sockets) / "kernel"))
        client = nbclient.NotebookClient(notebook, km=manager, timeout=TIMEOUT,
                                         shutdown_kernel="immediate",
                                         resources={"metadata": {"path": str(LESSONS)}})
        # A client given its kernel manager leaves the kernel running unless
        # told: stop it here, before its sockets' folder goes, not when this
        # process exits (the tests run every lesson in one process).
        client.execute(cleanup_kc=True)
    return notebook


def course_parts(readme):
    """The course's parts in reading order, as lessons/README.md lists them:
    ``[(heading, [lesson stem, ...]), ...]``. Every ``## `` heading starts a
    part, whose lessons are the notebooks its table links (``NN_name.ipynb``),
    in the table's order; a section that links none (the introduction) is no
    part. The README is the one place that says which lesson is on the main
    path and which in the appendix; the site's sidebar follows it."""
    parts = []
    for section in re.split(r"^## ", readme, flags=re.MULTILINE)[1:]:
        heading = section.splitlines()[0].strip()
        stems = LESSON_LINK.findall(section)
        if stems:
            parts.append((heading, stems))
    return parts


def guide_pages(contents=None):
    """The user guide's pages in reading order, as the site names them:
    ``guide/index`` (its contents, ``lessons/guide/index.md``), then each page
    that the contents link, in the order of their first links. The contents
    are the one place that orders the guide; a page they do not link is in no
    table of contents, which Sphinx reports and the build refuses."""
    if contents is None:
        contents = (GUIDE / "index.md").read_text(encoding="utf-8")
    stems = dict.fromkeys(GUIDE_LINK.findall(contents))
    return ["guide/index"] + [f"guide/{stem}" for stem in stems if stem != "index"]


def site_index(readme, lessons, guide=None):
    """The site's home page: lessons/README.md (its table of contents links to
    the notebooks, which MyST turns into links between pages), followed by one
    hidden table of contents per part of the course (the main path, the
    appendix), one for the user guide (``guide``, by default ``guide_pages()``)
    and one for the reference pages (the glossary), which gives the sidebar
    every page in order under its heading. A lesson that the README does not
    list is an error: it would be missing from the sidebar."""
    parts = course_parts(readme)
    listed = [stem for _, stems in parts for stem in stems]
    unlisted = sorted({lesson.stem for lesson in lessons} - set(listed))
    if unlisted:
        raise SystemExit(f"build.py: lessons/README.md does not list {unlisted}")
    guide = guide_pages() if guide is None else guide
    sections = parts + [(GUIDE_CAPTION, guide)] + [REFERENCE]
    toctrees = ["\n".join(["", "```{toctree}", ":hidden:", ":maxdepth: 1", f":caption: {heading}",
                            "", *stems, "```", ""]) for heading, stems in sections if stems]
    return readme.rstrip("\n") + "\n" + "".join(toctrees)


def copy_guide(folder):
    """The guide's pages into ``folder`` (Sphinx's sources, as ``guide/``), its
    benchmarks page with the latest results put in (lessons/site/benchmark_results.py)."""
    target = folder / "guide"
    shutil.copytree(GUIDE, target)
    template = (GUIDE / "benchmarks.md").read_text(encoding="utf-8")
    page = site_module("benchmark_results").page(template, RESULTS)
    (target / "benchmarks.md").write_text(page, encoding="utf-8")


def build_site(out):
    """Build the course as a static website into the folder ``out`` (index.html
    at its root) from the stored notebooks, which are not run again. Sphinx reads
    a temporary copy of them, so that nothing it writes lands in lessons/."""
    from sphinx.cmd.build import build_main

    notebooks = [source.with_suffix(".ipynb") for source in lesson_sources()]
    missing = [n.name for n in notebooks if not n.exists()]
    if missing:
        raise SystemExit(f"build.py: no stored notebook {missing}: python lessons/build.py first")
    with tempfile.TemporaryDirectory() as folder:
        source = pathlib.Path(folder)
        for notebook in notebooks:
            shutil.copy(notebook, source / notebook.name)
        for page in REFERENCE[1]:
            shutil.copy(LESSONS / f"{page}.md", source / f"{page}.md")
        copy_guide(source)
        readme = (LESSONS / "README.md").read_text(encoding="utf-8")
        (source / "index.md").write_text(site_index(readme, notebooks), encoding="utf-8")
        # -c: the configuration stays in lessons/site/; -W: a warning (a broken link,
        # a missing image) fails the build; -q: only warnings and errors are printed.
        status = build_main(["-b", "html", "-q", "-W", "-c", str(SITE_CONFIG),
                             "-d", str(source / ".doctrees"), str(source), str(out)])
    if status:
        raise SystemExit(f"build.py: Sphinx failed (exit status {status})")
    check_site(lesson_sources(), out)
    check_guide(out)


def check_site(sources, out):
    """Fail (SystemExit, so a non-zero exit status) on any problem that
    lessons/site_checks.py finds in the lesson ``sources`` or in the pages built
    in ``out``: one line each, naming the file."""
    problems = site_checks().site_problems(sources, out)
    if problems:
        raise SystemExit("\n".join(f"build.py: {problem}" for problem in problems))


def check_guide(out, root=ROOT):
    """Fail (SystemExit) on a broken link of a README or of a guide page (in
    the repository ``root``), and on a command or flag of ``minitrans`` that
    the reference built in ``out`` lacks: one line each, naming the file."""
    from minitrans.cli.main import build_parser

    links = load(SITE_CONFIG / "link_checks.py")
    problems = links.link_problems(links.markdown_to_check(root), root, site=root / "lessons")
    problems += load(SITE_CONFIG / "reference_check.py").reference_problems(
        pathlib.Path(out) / "guide" / "command-line.html", build_parser())
    if problems:
        raise SystemExit("\n".join(f"build.py: {problem}" for problem in problems))


def site_checks():
    """lessons/site_checks.py, loaded from its path: build.py runs as a script
    and is loaded by the tests from its path too, so lessons/ need not be on
    sys.path."""
    return load(LESSONS / "site_checks.py")


def site_module(name):
    """A module of lessons/site/ (``benchmark_results``), loaded from its path."""
    return load(SITE_CONFIG / f"{name}.py")


def load(path):
    """The Python file ``path`` as a module named after it."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(arguments):
    if arguments[:1] == ["--site"]:
        out = pathlib.Path(arguments[1]) if len(arguments) > 1 else SITE_DEFAULT
        start = time.perf_counter()
        build_site(out)
        print(f"site: {time.perf_counter() - start:.1f} s, open {out / 'index.html'}")
        return
    import jupytext

    for source in lesson_sources(arguments):
        start = time.perf_counter()
        notebook = execute(source)
        target = source.with_suffix(".ipynb")
        jupytext.write(notebook, target, fmt="ipynb")
        size = target.stat().st_size / 1e6
        print(f"{source.name}: {time.perf_counter() - start:.1f} s, {target.name} {size:.2f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
