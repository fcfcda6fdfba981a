"""The checks ``lessons/build.py --site`` runs after Sphinx (lessons/site_checks.py).

Each check is shown catching its own planted defect, the kind that once reached
the site: a Markdown heading left in a code cell (lesson 12's section 6), a
Markdown table shown as a paragraph of "|" (lesson 18's toy Table 3), a stray
"$" beside a formula (lesson 14). A planted page with none of them passes, the
real lesson sources pass, and the build fails with one line per problem. That
the real built site passes is tested where the site is built once,
test_site.py.
"""

import pathlib

import pytest
from tests.conftest import load_module

LESSONS = pathlib.Path(__file__).resolve().parents[2] / "lessons"
checks = load_module(LESSONS / "site_checks.py", "site_checks")
build = load_module(LESSONS / "build.py", "lessons_build_for_checks")

LOST_HEADING = """# %% [markdown]
# ## 5. A section
#
# Text.

# %%
print("pairs")
#
# ## 6. The decoder-only sibling
#
# Drop the encoder.

# %% [markdown]
# ## 7. Exercise
"""
GOOD_SOURCE = """# %% [markdown]
# # Lesson
#
# ## 1. Text, with a heading

# %%
# a comment, and a commented-out line of code:
# x = 1  # ## not a heading: no "# " before the hashes at the start
print("# ## inside a string is code")
"""
PAGE = "<html><head><script>var x = '$';</script></head><body>{}</body></html>"
MATH = '<span class="math notranslate nohighlight">\\(x^2\\)</span>'
DISPLAY = '<div class="math notranslate nohighlight">\\[\\sum_i |x_i|\\]</div>'
PLANTED_PAGES = {
    "good.html": (
        f"<p>Inline {MATH}, a bar in a sentence: x [W_Q | W_K | W_V].</p>{DISPLAY}"
        "<table><tr><td>a</td><td>b</td></tr></table>"
        "<p>It costs $5 and <code>$|a|b|</code> is code.</p><pre>| a | b |\n|---|---|</pre>"
    ),
    "raw_table.html": '<div class="output text_markdown"><p>| | N | d_model |\n'
                      "| --- | --- | --- |\n| base | 2 | 64 |</p></div>",
    "rule_only.html": "<p>A table lost its rows: |---|---|</p>",
    "dollar_before.html": f"<ol><li><p>an Adam step at the rate of §5.3,\n${MATH}$</p></li></ol>",
    "dollar_after.html": f"<p>the rate {MATH} $ and more</p>",
}


@pytest.fixture
def pages(tmp_path):
    for name, body in PLANTED_PAGES.items():
        (tmp_path / name).write_text(PAGE.format(body), encoding="utf-8")
    return tmp_path


def test_a_heading_in_a_code_cell_is_caught(tmp_path):
    source = tmp_path / "12_planted.py"
    source.write_text(LOST_HEADING, encoding="utf-8")
    assert checks.source_problems(source) == [
        "12_planted.py, line 9: a Markdown heading inside a code cell "
        "('# ## 6. The decoder-only sibling'): is a '# %% [markdown]' marker missing?"
    ]


def test_headings_in_text_cells_and_comments_in_code_pass(tmp_path):
    source = tmp_path / "01_planted.py"
    source.write_text(GOOD_SOURCE, encoding="utf-8")
    assert checks.source_problems(source) == []


def test_every_lesson_source_passes():
    sources = build.lesson_sources()
    assert sources and [p for s in sources for p in checks.source_problems(s)] == []


def test_a_page_without_the_defects_passes(pages):
    assert checks.page_problems(pages / "good.html") == []


@pytest.mark.parametrize("page, expected", [
    ("raw_table.html", "raw_table.html: a Markdown table shown as a paragraph of '|' "
                       "(a Markdown output read as CommonMark?): '| | N | d_model |'"),
    ("rule_only.html", "rule_only.html: a Markdown table shown as a paragraph of '|' "),
    ("dollar_before.html", "dollar_before.html: a stray '$' next to a formula (display maths "
                           "inside a paragraph?): 'dam step at the rate of §5.3, "
                           "$<formula>$'"),  # 30 characters either side
    ("dollar_after.html", "dollar_after.html: a stray '$' next to a formula "),
])
def test_each_page_defect_is_caught(pages, page, expected):
    problems = checks.page_problems(pages / page)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_the_build_fails_with_one_line_per_problem(pages, tmp_path_factory):
    source = tmp_path_factory.mktemp("sources") / "12_planted.py"
    source.write_text(LOST_HEADING, encoding="utf-8")
    with pytest.raises(SystemExit) as failure:
        build.check_site([source], pages)
    lines = str(failure.value.code).splitlines()
    assert len(lines) == 1 + len(PLANTED_PAGES) - 1  # every planted page but the good one
    assert all(line.startswith("build.py: ") for line in lines)
    assert lines[0].startswith("build.py: 12_planted.py, line 9: a Markdown heading")
    build.check_site([], pages / "no pages here")  # nothing to complain about: returns
