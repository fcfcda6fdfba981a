"""Checks that ``build.py --site`` runs on the lessons and the pages it built.

Sphinx's warnings (``-W``) catch broken links and missing images, but not a
page that builds cleanly and still reads wrong. Three such defects have a
check each here:

* a Markdown heading inside a code cell: a lesson source whose ``# %% [markdown]``
  marker is missing shows its next section as code comments, and the page's
  contents skip that section (lesson 12's section 6);
* a Markdown table shown as a paragraph: a cell's Markdown output rendered as
  CommonMark, which has no tables, comes out as a paragraph of ``|``
  characters (lesson 18's toy Table 3);
* a stray ``$`` next to a formula: display maths written inside a paragraph
  typesets its inside and leaves the outer ``$`` of ``$$`` as text (lesson 14).

The user guide and the READMEs, which Sphinx reads only in part or not at
all, have checks of their own beside the site's configuration:
``site/reference_check.py`` (every command and flag in the command-line
reference) and ``site/link_checks.py`` (every link of every README and guide
page).

Each check returns its problems as one line each, naming the file; no problem,
an empty list. They read text only (no browser), so they take well under a second.
"""

import html.parser
import pathlib
import re

# "# %%" starts a cell in jupytext's percent format; "# %% [markdown]" a text cell.
CELL_MARKER = re.compile(r"^# %%(.*)$")
# A commented Markdown heading, "# ## 6. Title": text that lost its "[markdown]" marker.
HEADING_IN_CODE = re.compile(r"^# #{1,6} \S")
# A line of a Markdown table: "| a | b |" (two or more cells) or a rule "|---|" / "| :-- |".
TABLE_ROW = re.compile(r"^\s*\|(?:[^|\n]*\|){2,}\s*$")
TABLE_RULE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
# Where a formula stood in a page's text (see PageText), and a "$" beside it.
FORMULA = "\x00"
STRAY_DOLLAR = re.compile(r"\$[ \t]*\x00|\x00[ \t]*\$")
# Elements whose text is not prose: code keeps its "|" and "$", scripts are not shown.
NOT_PROSE = {"pre", "code", "script", "style", "textarea", "kbd", "samp"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


def source_problems(path):
    """A Markdown heading in a code cell of a lesson source (jupytext percent format)."""
    problems, in_code = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        marker = CELL_MARKER.match(line)
        if marker:
            in_code = "[markdown]" not in marker.group(1) and "[md]" not in marker.group(1)
        elif in_code and HEADING_IN_CODE.match(line):
            problems.append(f"{path.name}, line {number}: a Markdown heading inside a code "
                            f"cell ({line.strip()!r}): is a '# %% [markdown]' marker missing?")
    return problems


class PageText(html.parser.HTMLParser):
    """A built page's prose: the text of each paragraph (``<p>``), and the text
    of the whole body with every formula (an element of class ``math``)
    replaced by one FORMULA character and code, scripts and styles left out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, kind): kind is "math", "skip", "p" or ""
        self.paragraphs, self.body = [], []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        inside = [kind for _, kind in self.stack]
        if "math" in classes and "math" not in inside and "skip" not in inside:
            self.body.append(FORMULA)
            kind = "math"
        else:
            kind = "skip" if tag in NOT_PROSE else "p" if tag == "p" else ""
        if kind == "p":
            self.paragraphs.append([])
        self.stack.append((tag, kind))

    def handle_endtag(self, tag):
        # Pop up to the matching open tag; a stray end tag (HTML allows some) is ignored.
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth][0] == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        inside = [kind for _, kind in self.stack]
        if "math" in inside or "skip" in inside:
            return
        self.body.append(data)
        if "p" in inside:
            self.paragraphs[-1].append(data)


def page_problems(path):
    """A Markdown table shown as a paragraph, and a "$" beside a formula, in a built page."""
    reader = PageText()
    reader.feed(path.read_text(encoding="utf-8"))
    problems = []
    for paragraph in ("".join(p) for p in reader.paragraphs):
        rows = [line for line in paragraph.splitlines()
                if TABLE_ROW.match(line) or TABLE_RULE.search(line)]
        if rows:
            problems.append(f"{path.name}: a Markdown table shown as a paragraph of '|' "
                            f"(a Markdown output read as CommonMark?): {rows[0].strip()[:60]!r}")
    text = "".join(reader.body)
    for match in STRAY_DOLLAR.finditer(text):
        around = text[max(0, match.start() - 30):match.end() + 30].replace(FORMULA, "<formula>")
        problems.append(f"{path.name}: a stray '$' next to a formula (display maths inside a "
                        f"paragraph?): {' '.join(around.split())!r}")
    return problems


def site_problems(sources, out):
    """Every problem of the lesson ``sources`` and of the pages built in ``out``
    (the guide's, in ``out/guide/``, included; Sphinx's own in ``_static`` not)."""
    problems = [p for source in sources for p in source_problems(source)]
    out = pathlib.Path(out)
    pages = sorted(p for p in out.rglob("*.html") if "_static" not in p.relative_to(out).parts)
    return problems + [p for page in pages for p in page_problems(page)]
