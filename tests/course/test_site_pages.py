"""The built site read as text, without a browser: what its configuration
(lessons/site/conf.py) and build (lessons/build.py) promise. Every lesson and
every page of the user guide has a page and the home page links it; nothing is
loaded from another host; the build's own checks (lessons/site_checks.py) pass
on every page; the command-line reference lists every command and flag, with
the flags in its texts shown as code; the benchmarks page has a section for
each script of the suite; a Markdown output is a real table; consecutive prints
share one box; the glossary has a letter index; the site's stylesheet and CJK
font are served with their licence.

Needs the site extra; the site is built once per test run (site_browser.py).
"""

import html
import re

import pytest
from tests.conftest import load_module
from tests.course.site_browser import ROOT, built_site, needs_site_tools


@pytest.fixture(scope="module")
def site():
    return built_site()


@needs_site_tools
def test_the_site_has_a_home_page_and_every_lesson(site):
    assert (site / "index.html").exists()
    lessons = sorted(
        p.with_suffix(".html").name for p in (ROOT / "lessons").glob("[0-9][0-9]_*.py")
    )
    assert lessons and all((site / name).exists() for name in lessons)
    index = (site / "index.html").read_text(encoding="utf-8")
    assert all(f'href="{name}"' in index for name in lessons), "the home page links every lesson"


@needs_site_tools
def test_the_site_has_every_page_of_the_guide_and_the_home_page_links_them(site):
    build = load_module(ROOT / "lessons" / "build.py", "lessons_build_for_pages")
    guide = build.guide_pages()
    sources = sorted(p.stem for p in (ROOT / "lessons" / "guide").glob("*.md"))
    assert sorted(page.removeprefix("guide/") for page in guide) == sources
    index = (site / "index.html").read_text(encoding="utf-8")
    assert all((site / f"{page}.html").exists() for page in guide)
    assert all(f'href="{page}.html"' in index for page in guide), "the home page links the guide"
    assert index.index('href="guide/index.html"') < index.index('href="glossary.html"')


@needs_site_tools
def test_the_command_line_reference_has_every_command_and_flag(site):
    """The build's own check, run again so that a failure names what is missing,
    and the texts as the terminal writes them: flags as code, not "–flag"."""
    from minitrans.cli.main import build_parser

    reference = load_module(ROOT / "lessons" / "site" / "reference_check.py", "reference_check")
    page = site / "guide" / "command-line.html"
    assert reference.reference_problems(page, build_parser()) == []
    text = page.read_text(encoding="utf-8")
    assert '<span class="pre">--eval-every</span></code> steps' in text
    reference = text.split('id="every-command-and-flag"')[1]
    assert "&lt;|endoftext|&gt;" in reference and "–" not in reference


@needs_site_tools
def test_the_benchmarks_page_has_a_section_for_each_script_of_the_suite(site):
    results = load_module(ROOT / "lessons" / "site" / "benchmark_results.py", "benchmark_results")
    text = (site / "guide" / "benchmarks.html").read_text(encoding="utf-8")
    sections = text.split("<h2>")[1:]
    for name, script in results.SUITE.items():
        found = results.runs(ROOT / "benchmarks" / "results" / name)
        expected = f"{name}/{found[-1].name}" if found else f"{name}/</span></code> holds no"
        assert any(expected in section for section in sections), script


@needs_site_tools
def test_no_page_names_another_host_to_load_from(site):
    """The quick check without a browser: no src= and no CSS url() point at http(s)."""
    loads = re.compile(r"""(?:src=|url\()["']?(https?:)?//(?!127\.0\.0\.1)""")
    offenders = [
        str(p.relative_to(site))
        for p in site.rglob("*")
        if p.suffix in (".html", ".css") and loads.search(p.read_text("utf-8", "replace"))
    ]
    assert not offenders, offenders


@needs_site_tools
def test_the_built_pages_pass_the_builds_own_checks(site):
    """The build ran them and passed (the fixture asserts its exit status); run
    here again on the pages, so that a failure names them in the test too."""
    checks = load_module(ROOT / "lessons" / "site_checks.py", "site_checks")
    sources = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
    assert checks.site_problems(sources, site) == []


@needs_site_tools
def test_a_markdown_output_is_shown_as_a_table(site):
    """Lesson 18's toy Table 3 is a Markdown output (display(Markdown(...))):
    read as MyST it is a <table>, not a paragraph of "|" (nb_render_markdown_format)."""
    page = (site / "18_the_papers_experiments.html").read_text(encoding="utf-8")
    start = page.index("markdown_table")
    cell = page[start:page.index('<div class="cell docutils', start)]
    assert "<table" in cell and "s/run" in cell, "the ablation table is not a <table>"


@needs_site_tools
def test_consecutive_prints_share_one_box(site):
    """Two stdout boxes side by side would be one cell's prints split (nb_merge_streams)."""
    split = re.compile(r'</pre></div>\s*</div>\s*<div class="output stream')
    pages = [p.name for p in site.glob("*.html") if split.search(p.read_text(encoding="utf-8"))]
    assert not pages, f"prints shown in separate boxes on {pages}"


@needs_site_tools
def test_the_glossary_has_a_letter_index(site):
    """A link per letter under the title, each to the first term of that letter."""
    page = (site / "glossary.html").read_text(encoding="utf-8")
    index = re.search(r'<p class="letter-index">(.*?)</p>', page, re.DOTALL)
    assert index and page.index("letter-index") < page.index("<table"), "no index above the table"
    links = re.findall(r'href="#letter-([a-z])">([A-Z])</a>', index.group(1))
    rows = re.findall(r'<tr class="[^"]*" id="letter-([a-z])">\s*<td><p>(.*?)</p>', page)
    glossary = (ROOT / "lessons" / "glossary.md").read_text(encoding="utf-8")
    terms = [html_text(line.split("|")[1]) for line in glossary.splitlines()
             if line.startswith("| ") and not line.startswith(("| English", "| ---"))]
    filed = {term: re.search(r"[a-z]", term.lower()).group(0) for term in terms}  # <pad>: p
    letters = list(dict.fromkeys(filed.values()))
    assert [a for a, _ in links] == letters and all(a == b.lower() for a, b in links)
    first = {letter: next(t for t in terms if filed[t] == letter) for letter in letters}
    assert {letter: html_text(cell) for letter, cell in rows} == first


def html_text(fragment):
    """Markdown or HTML of a table cell as plain text, to compare the two."""
    return html.unescape(re.sub(r"<[^>]+>|`", "", fragment)).strip()


@needs_site_tools
def test_the_sites_styles_and_cjk_font_are_served(site):
    static = site / "_static"
    assert (static / "minitrans.css").exists() and (static / "fonts" / "OFL.txt").exists()
    assert (static / "fonts" / "cjk-subset-regular.woff").exists()
    pages = [p for p in site.rglob("*.html")
             if p.name not in ("genindex.html", "search.html") and "_static" not in p.parts]
    unstyled = [p.name for p in pages if "_static/minitrans.css" not in p.read_text("utf-8")]
    assert not unstyled, unstyled


