"""Sphinx configuration of the course website, built by ``python lessons/build.py --site``.

The pages are the stored, executed notebooks: nothing is run while building
(``nb_execution_mode = "off"``). MathJax comes from the sphinx-mathjax-offline
package and is copied into the site, so that no page loads anything from
another host and the course reads the same without a network.

The user guide's command-line reference is sphinx-argparse's ``argparse``
directive over ``cli_reference.parser()`` (this folder), the ``minitrans``
parser read afresh at every build.
"""

import pathlib
import re
import sys

from docutils import nodes

# cli_reference.py, which the guide's argparse directive names as its module, is beside this file.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

project = "The minitrans course"
author = "minitrans"
copyright = "minitrans authors"

extensions = [
    "myst_nb",  # notebooks and Markdown as pages
    "sphinx-mathjax-offline",  # MathJax 3 served from _static/, not from a CDN
    "sphinxarg.ext",  # the guide's command-line reference, from the argument parsers
]
# The reference heads each command's section with its whole name, "minitrans train".
sphinxarg_full_subcommand_name = True

# The notebooks are stored executed; running them again belongs to build.py without --site.
nb_execution_mode = "off"
# A cell's Markdown output (lesson 18's `display(Markdown(table))`) is read as MyST, which has
# tables; the default, CommonMark, has none and shows a table as a paragraph of "|" characters.
nb_render_markdown_format = "myst"
# Consecutive prints of a cell in one box, as Jupyter shows them, not one box per write.
nb_merge_streams = True
# $...$ and $$...$$ in the lessons' Markdown cells, \begin{align} blocks too.
myst_enable_extensions = ["dollarmath", "amsmath"]
# MyST headings become link targets, so "#section" links inside a lesson work.
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = "minitrans"
GLOSSARY = "glossary"  # the glossary page's name (build.py copies lessons/glossary.md)
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    # No buttons that lead to other hosts (launch on Binder, edit on GitHub, ...).
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "launch_buttons": {},
}
# The theme logs a console error on a first visit when no colour mode is set.
html_context = {"default_mode": "auto"}
# A page without its own icon makes the browser ask for /favicon.ico, which is not there.
html_favicon = "favicon.svg"
# The site's own styles and the CJK font they load (static/minitrans.css says why).
html_static_path = ["static"]
html_css_files = ["minitrans.css"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]


def plain_title(app, pagename, templatename, context, doctree):
    """A browser tab shows a page's <title> as plain text, where MathJax never
    runs: write inline TeX in a title (lesson 2's "the $\\sqrt{d_k}$") as text,
    "the √d_k", rather than as "the \\(\\sqrt{d_k}\\)"."""
    if "title" in context:
        context["title"] = re.sub(
            r"\\\((.*?)\\\)", lambda m: tex_as_text(m.group(1)), context["title"]
        )


def tex_as_text(tex):
    """Inline TeX as readable text: \\sqrt becomes √, braces and backslashes go."""
    return re.sub(r"[\\{}]", "", tex.replace("\\sqrt", "√"))


def glossary_letter_index(app, doctree):
    """The glossary is one table of over a hundred terms: give it an index of
    letters under its title, each a link to the first term of that letter,
    whose row gets the anchor ``letter-x``. Built from the table itself, so it
    follows every term added; a term such as ``<pad>`` counts under its name."""
    if app.env.docname != GLOSSARY:
        return
    tables = list(doctree.findall(nodes.table))
    if not tables:
        return
    anchors = {}
    for row in next(tables[0].findall(nodes.tbody)).children:
        letter = first_letter(row.children[0].astext())
        if letter and letter not in anchors:
            anchors[letter] = f"letter-{letter}"
            row["ids"].append(anchors[letter])
    index = nodes.paragraph(classes=["letter-index"])
    for letter, anchor in anchors.items():
        index += nodes.reference("", letter.upper(), refid=anchor, internal=True)
        index += nodes.Text(" ")
    section = next(doctree.findall(nodes.section))
    section.insert(1, index)  # after the page's title


def first_letter(term):
    """The letter a glossary term is filed under: its first letter, lower-case."""
    match = re.search(r"[A-Za-z]", term)
    return match.group(0).lower() if match else None


def setup(app):
    app.connect("html-page-context", plain_title)
    app.connect("doctree-read", glossary_letter_index)
    # MathJax on every page, not only on those whose text has mathematics: the
    # sidebar shows every lesson's title, and lesson 2's has some.
    app.set_html_assets_policy("always")
