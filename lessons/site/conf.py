"""Sphinx configuration of the course website, built by ``python lessons/build.py --site``.

The pages are the stored, executed notebooks: nothing is run while building
(``nb_execution_mode = "off"``). MathJax comes from the sphinx-mathjax-offline
package and is copied into the site, so that no page loads anything from
another host and the course reads the same without a network.
"""

import re

project = "The minitrans course"
author = "minitrans"
copyright = "minitrans authors"

extensions = [
    "myst_nb",  # notebooks and Markdown as pages
    "sphinx-mathjax-offline",  # MathJax 3 served from _static/, not from a CDN
]

# The notebooks are stored executed; running them again belongs to build.py without --site.
nb_execution_mode = "off"
# $...$ and $$...$$ in the lessons' Markdown cells, \begin{align} blocks too.
myst_enable_extensions = ["dollarmath", "amsmath"]
# MyST headings become link targets, so "#section" links inside a lesson work.
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = "minitrans"
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


def setup(app):
    app.connect("html-page-context", plain_title)
    # MathJax on every page, not only on those whose text has mathematics: the
    # sidebar shows every lesson's title, and lesson 2's has some.
    app.set_html_assets_policy("always")
