"""The links of every README and of the user guide's pages, which Sphinx reads
only in part or not at all: ``link_problems`` names each relative link whose
file does not exist, each ``#anchor`` that no heading of its target makes
(GitHub's slugs), each link from a page of the site to a file outside it (a
repository path outside the site is written as code instead), and each such
path written as code that does not exist. Links to other hosts are not
fetched. One line each, naming the file and the line.
"""

import json
import os
import pathlib
import re
import subprocess
import urllib.parse

from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin


# A path of the repository written as code: `minitrans/layers/linear.py`, `benchmarks/results/`.
REPOSITORY_PATH = re.compile(
    r"^(?:minitrans|minitrans_course|tests|benchmarks|examples|lessons)/[\w/.-]*$")
# A link that names a scheme ("https:", "mailto:"): another host, not checked.
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# href= and src= in HTML written inside Markdown.
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")


def markdown_parser():
    """CommonMark with tables, each heading given GitHub's id (mdit-py-plugins'
    anchors plugin: lower case, punctuation dropped, spaces as hyphens, "-1",
    "-2" after a repeat)."""
    return MarkdownIt("commonmark").enable("table").use(anchors_plugin, max_level=6)


def markdown_text(path):
    """The Markdown of ``path``: the file, or a notebook's Markdown cells."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    if pathlib.Path(path).suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def anchors(path):
    """The ids of the headings of a Markdown file or notebook."""
    tokens = markdown_parser().parse(markdown_text(path))
    return {t.attrGet("id") for t in tokens if t.type == "heading_open"}


def links(path):
    """``(line, target)`` of every link and image in the Markdown file ``path``,
    and ``(line, path)`` of every repository path it writes as code."""
    found, code = [], []
    for token in markdown_parser().parse(markdown_text(path)):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "html_block":
            found += [(line, target) for target in HTML_LINK.findall(token.content)]
        for child in token.children or []:
            if child.type in ("link_open", "image"):
                found.append((line, child.attrGet("href") or child.attrGet("src")))
            elif child.type == "html_inline":
                found += [(line, target) for target in HTML_LINK.findall(child.content)]
            elif child.type == "code_inline" and REPOSITORY_PATH.match(child.content):
                code.append((line, child.content))
    return found, code


def link_problems(files, root, site=None):
    """Every broken link of the Markdown ``files``: a relative link to a file
    that does not exist (relative to the file; "/..." to ``root``), an anchor
    that no heading of its target makes, and a repository path written as code
    that does not exist (relative to ``root``). A file inside ``site`` (a page
    of the website) may link only inside it. One line each: file, line, link."""
    root = pathlib.Path(root).resolve()
    site = pathlib.Path(site).resolve() if site is not None else None
    problems = []
    for path in files:
        path = pathlib.Path(path).resolve()
        shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        found, code = links(path)
        for line, target in found:
            problem = link_problem(path, target, root, site)
            if problem:
                problems.append(f"{shown}, line {line}: link '{target}' {problem}")
        problems += [f"{shown}, line {line}: `{name}` names no file of the repository"
                     for line, name in code if not (root / name.rstrip("/")).exists()]
    return problems


def link_problem(path, target, root, site):
    """What is wrong with the link ``target`` of the file ``path``, or None."""
    if not target or SCHEME.match(target):
        return None
    address, _, anchor = target.partition("#")
    address, anchor = urllib.parse.unquote(address), urllib.parse.unquote(anchor)
    if not address:
        linked = path
    elif address.startswith("/"):
        linked = root / address.lstrip("/")
    else:
        linked = path.parent / address
    linked = pathlib.Path(os.path.normpath(linked))  # ".." worked out, links not followed
    if site is not None and path.is_relative_to(site) and not linked.is_relative_to(site):
        return (f"leads out of the website's pages ({site.name}/): write a "
                "repository path as code, `like/this.py`")
    if not linked.exists():
        return "leads to no file"
    if anchor and linked.suffix in (".md", ".ipynb") and anchor not in anchors(linked):
        return f"names no heading of {linked.name}"
    return None


def markdown_to_check(root):
    """Every README.md of the repository ``root`` that git tracks or would
    track (not ignored), and the guide's pages (``lessons/guide/*.md``)."""
    root = pathlib.Path(root)
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--",
             "README.md", "*/README.md"],
            cwd=root, capture_output=True, text=True, check=True).stdout.split()
        readmes = [root / name for name in listed]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every README
        readmes = [p for p in root.rglob("README.md")
                   if not any(part.startswith(".") or part in ("build", "runs")
                              for part in p.relative_to(root).parts)]
    guide = sorted((root / "lessons" / "guide").glob("*.md"))
    return sorted({p for p in readmes if p.exists()}) + guide
