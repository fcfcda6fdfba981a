"""The course as a website, opened in a real browser.

``python lessons/build.py --site DIR`` builds the site from the stored notebooks
and the user guide's pages; a local server on 127.0.0.1 serves it and headless
Chromium opens every page, the guide's (in ``guide/``) included, each reached
from the home page.
Each page must have a title, load every image, typeset its mathematics, let a
formula wider than the column scroll rather than cut it off, load the site's
own CJK font for its Chinese text, log no error in the console, ask no other
host for anything, and every element marked ``data-interactive`` must respond
when its control is moved (the checks are in site_browser.py). Each check is
also shown failing on a small planted page. The built pages read as text,
without a browser: test_site_pages.py.
"""

import pytest

# CHROMIUM, CHROMEDRIVER, INSTALL_BROWSER, serve, base_url and page_problems are also
# used from here by test_interactive.py.
from tests.course.site_browser import (  # noqa: F401
    CHROMEDRIVER,
    CHROMIUM,
    INSTALL_BROWSER,
    ROOT,
    base_url,
    built_site,
    clipped_math_problems,
    math_problems,
    needs_browser,
    needs_site_tools,
    new_browser,
    page_problems,
    serve,
)


@pytest.fixture(scope="module")
def site():
    return built_site()


@pytest.fixture(scope="module")
def browser():
    driver = new_browser()
    yield driver
    driver.quit()


# ---- the site ----


def site_pages(site):
    """Every page of the built site, as paths from its root ("guide/index.html"),
    but the templates Sphinx's theme keeps in _static."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if "_static" not in p.relative_to(site).parts)


@needs_site_tools
@needs_browser
def test_every_page_passes_in_the_browser(site, browser):
    pages = site_pages(site)
    assert "guide/index.html" in pages and "guide/command-line.html" in pages, pages
    server = serve(site)
    try:
        problems = {page: page_problems(browser, base_url(server) + page) for page in pages}
        # The lessons' mathematics was really typeset, not merely absent.
        browser.get(base_url(server) + "05_scaled_dot_product_attention.html")
        math_problems(browser)
        assert browser.find_elements("css selector", "mjx-container"), "MathJax typeset nothing"
    finally:
        server.shutdown()
    assert not {page: found for page, found in problems.items() if found}


_LINKS = "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href);"


@needs_site_tools
@needs_browser
def test_the_home_page_leads_to_every_page_of_the_guide(site, browser):
    """Opened in the browser, the home page links each page of the guide (its
    sidebar, under "User guide"), and each guide page links back home."""
    server = serve(site)
    try:
        browser.get(base_url(server) + "index.html")
        linked = {url.split("#")[0] for url in browser.execute_script(_LINKS)}
        guide = [page for page in site_pages(site) if page.startswith("guide/")]
        unreached = [page for page in guide if base_url(server) + page not in linked]
        browser.get(base_url(server) + "guide/command-line.html")
        home = base_url(server) + "index.html" in browser.execute_script(_LINKS)
        caption = "User guide" in browser.find_element("css selector", "nav.bd-links").text
    finally:
        server.shutdown()
    assert len(guide) >= 7 and not unreached, unreached
    assert home and caption


# Scroll the first formula containing the given text inside the box that
# scrolls it; returns [the formula is wider than a box around it, the box's scrollLeft after].
_SCROLL_FORMULA = """
const container = Array.from(document.querySelectorAll('mjx-container'))
  .find(c => c.textContent.includes(arguments[0]));
const width = container.querySelector('mjx-math').getBoundingClientRect().width;
let wide = false;
for (let box = container; box && box !== document.body; box = box.parentElement) {
  if (box.clientWidth + 1 >= width) continue;
  wide = true;
  const overflow = getComputedStyle(box).overflowX;
  if (overflow !== 'auto' && overflow !== 'scroll') continue;
  box.scrollLeft = 100;
  return [true, box.scrollLeft];
}
return [wide, 0];
"""


@needs_site_tools
@needs_browser
@pytest.mark.parametrize(
    "page, text",
    [("07_multi_head_attention.html", "MultiHead"), ("14_training_copy_and_translation.html",
                                                    "lrate")],
)
def test_a_formula_wider_than_the_window_scrolls(site, browser, page, text):
    """In a 420-pixel window lesson 7's MultiHead and lesson 14's learning rate
    (display formulas) are wider than the text: each scrolls sideways."""
    server = serve(site)
    browser.set_window_size(420, 900)
    try:
        browser.get(base_url(server) + page)
        math_problems(browser)  # waits for MathJax
        wide, scrolled = browser.execute_script(_SCROLL_FORMULA, text)
        clipped = clipped_math_problems(browser)
    finally:
        browser.set_window_size(1280, 900)
        server.shutdown()
    assert wide, f"the formula with {text!r} fits the window: the test shows nothing"
    assert scrolled > 0 and not clipped, (scrolled, clipped)


# ---- each check fails on a planted bad page ----

PICTURE = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8">'
    '<rect width="8" height="8"/></svg>'
)
SLIDER = (
    '<div data-interactive id="{id}"><input type="range" min="0" max="10" value="5">'
    "<output>5</output></div>"
)
RESPONDS = (
    "<script>document.querySelector('#live input').addEventListener('input', e => "
    "{ e.target.nextElementSibling.textContent = e.target.value; });</script>"
)
# A formula wider than its 100-pixel box, as MathJax writes one; the box scrolls or clips.
WIDE_MATH = (
    "<div class='math' style='width: 100px; overflow-x: {overflow}'><mjx-container>"
    "<mjx-math style='display: inline-block; width: 400px'>x</mjx-math></mjx-container></div>"
)
# Chinese text in the site's own CJK font, as minitrans.css loads it.
CJK_TEXT = (
    "<style>@font-face {{ font-family: 'minitrans CJK'; src: url('cjk.woff'); }}"
    "p.cjk {{ font-family: 'minitrans CJK', sans-serif; }}</style><p class='cjk'>术语表</p>"
)
PLANTED = {
    "good.html": "<title>Good</title><img src='picture.svg'><p>x squared</p>"
    + SLIDER.format(id="live")
    + RESPONDS
    + WIDE_MATH.format(overflow="auto")
    + CJK_TEXT.format(),
    "untitled.html": "<title></title><p>no title</p>",
    "broken_image.html": "<title>Broken</title><img src='missing.png'>",
    "external_script.html": "<title>External</title><script src='http://example.invalid/a.js'>"
    "</script>",
    "raw_math.html": "<title>Raw</title><p><span class='math'>\\(x^2\\)</span> and $$y$$</p>",
    "console_error.html": "<title>Error</title><script>console.error('planted')</script>",
    "dead_figure.html": "<title>Dead</title>" + SLIDER.format(id="dead"),
    "no_control.html": "<title>No control</title><div data-interactive id='bare'>5</div>",
    "clipped_math.html": "<title>Clipped</title>" + WIDE_MATH.format(overflow="hidden"),
    "cjk_without_font.html": "<title>No CJK font</title><p>术语表</p>",
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Small hand-made pages, each with one fault, served on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("planted")
    (folder / "picture.svg").write_text(PICTURE)
    font = ROOT / "lessons" / "site" / "static" / "fonts" / "cjk-subset-regular.woff"
    (folder / "cjk.woff").write_bytes(font.read_bytes())
    for name, body in PLANTED.items():
        (folder / name).write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<link rel='icon' href='picture.svg'></head>"
            f"<body>{body}</body></html>",
            encoding="utf-8",
        )
    server = serve(folder)
    yield base_url(server)
    server.shutdown()


@needs_browser
@pytest.mark.parametrize(
    "page, expected",
    [
        ("good.html", None),
        ("untitled.html", "the page has no title"),
        ("broken_image.html", "image not loaded: "),
        ("external_script.html", "request to another host: http://example.invalid/a.js"),
        ("raw_math.html", "1 math element(s) not typeset"),
        ("raw_math.html", "raw TeX in the text: "),
        ("console_error.html", "console: "),
        ("dead_figure.html", "interactive figure dead did not respond to its control"),
        ("no_control.html", "interactive figure bare has no control (input or select)"),
        ("clipped_math.html", "formula clipped, not scrollable: 'x'"),
        ("cjk_without_font.html", "CJK text, but the site's CJK font is not loaded"),
    ],
)
def test_each_check_fails_on_a_planted_page(planted, browser, page, expected):
    """The good page passes every check (its figure responds to its slider); each
    other page is caught by the check meant for its fault."""
    problems = page_problems(browser, planted + page)
    if expected is None:
        assert problems == []
    else:
        assert any(p.startswith(expected) for p in problems), problems
