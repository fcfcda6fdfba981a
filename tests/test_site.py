"""The course as a website, opened in a real browser.

``python lessons/build.py --site DIR`` builds the site from the stored notebooks;
a local server on 127.0.0.1 serves it and headless Chromium opens every page.
Each page must have a title, load every image, typeset its mathematics, log no
error in the console, ask no other host for anything, and every element marked
``data-interactive`` must respond when its control is moved. Each check is also
shown failing on a small planted page.

Needs the site extra (Sphinx, MyST-NB, the book theme, offline MathJax),
Selenium, and Debian's chromium and chromium-driver; the tests say which is
missing and skip without them.
"""

import functools
import http.server
import importlib.util
import pathlib
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMEDRIVER = pathlib.Path("/usr/bin/chromedriver")
INSTALL_BROWSER = "apt-get install chromium chromium-driver, and pip install selenium"
SITE_TOOLS = ["sphinx", "myst_nb", "sphinx_book_theme"]


def _missing_browser():
    """Why the browser cannot run here, or None."""
    if importlib.util.find_spec("selenium") is None:
        return f"Selenium is not installed ({INSTALL_BROWSER})"
    for program in (CHROMIUM, CHROMEDRIVER):
        if not program.exists():
            return f"{program} is missing ({INSTALL_BROWSER})"
    return None


needs_browser = pytest.mark.skipif(_missing_browser() is not None, reason=str(_missing_browser()))
needs_site_tools = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in SITE_TOOLS),
    reason='building the site needs the site extra: pip install ".[site]"',
)


# ---- the checks, one function each, given a Selenium driver on a loaded page ----


def title_problems(driver):
    """A page needs a title, written as text (no TeX left in it)."""
    title = driver.title.strip()
    if not title:
        return ["the page has no title"]
    if "\\(" in title or "$" in title:
        return [f"the title shows raw TeX: {title!r}"]
    return []


def image_problems(driver):
    """Every <img> finished loading and has a width (a broken one has naturalWidth 0)."""
    broken = driver.execute_script(
        "return Array.from(document.images)"
        ".filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src);"
    )
    return [f"image not loaded: {src}" for src in broken]


# Text outside code, scripts and typeset math that still holds TeX delimiters.
_RAW_MATH = """
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const raw = [];
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  if (node.parentElement.closest('pre, code, script, style, mjx-container, textarea')) continue;
  const text = node.textContent;
  if (/\\$\\$|\\\\\\(|\\\\\\[|\\\\begin\\{/.test(text)) raw.push(text.trim().slice(0, 60));
}
return raw;
"""


def math_problems(driver, wait=10.0):
    """Mathematics is typeset: once MathJax has finished (if the page loads it),
    every Sphinx math element holds an mjx-container and no TeX delimiter is left
    in the text. A page without mathematics passes."""
    driver.set_script_timeout(wait)
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const start = window.MathJax && MathJax.startup && MathJax.startup.promise;"
        "start ? start.then(() => done(true), () => done(false)) : done(false);"
    )
    untypeset = driver.execute_script(
        "return Array.from(document.querySelectorAll('.math'))"
        ".filter(m => !m.querySelector('mjx-container')).length;"
    )
    problems = [f"{untypeset} math element(s) not typeset"] if untypeset else []
    return problems + [
        f"raw TeX in the text: {text!r}" for text in driver.execute_script(_RAW_MATH)
    ]


def console_problems(driver):
    """No SEVERE entry in the browser's console (errors, failed loads), since the last read."""
    return [
        f"console: {entry['message']}"
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
    ]


def request_problems(driver, allowed_host="127.0.0.1"):
    """Every request the page made (from Chrome's DevTools performance log,
    Network.requestWillBeSent, since the last read) went to ``allowed_host``;
    data: and blob: URLs stay in the page."""
    import json

    problems = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        url = message["params"]["request"]["url"]
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("data", "blob") and parts.hostname != allowed_host:
            problems.append(f"request to another host: {url}")
    return problems


# Move an interactive element's first control to another value and fire the
# events a figure listens to; returns false when the element has no control.
_MOVE_CONTROL = """
const control = arguments[0].querySelector('input, select');
if (!control) return false;
if (control.tagName === 'SELECT') {
  control.selectedIndex = (control.selectedIndex + 1) % control.options.length;
} else if (control.type === 'checkbox') {
  control.checked = !control.checked;
} else {
  const low = Number(control.min || 0), high = Number(control.max || 100);
  control.value = Number(control.value) === high ? low : high;
}
for (const kind of ['input', 'change']) control.dispatchEvent(new Event(kind, {bubbles: true}));
return true;
"""
# What an interactive figure shows: its markup, and the pixels of its canvases.
_SNAPSHOT = """
const element = arguments[0];
const canvases = Array.from(element.querySelectorAll('canvas')).map(c => c.toDataURL());
return element.innerHTML + canvases.join('');
"""


def interactive_problems(driver, wait=2.0):
    """Every element marked ``data-interactive`` changes what it shows within
    ``wait`` seconds of its control (an input or a select inside it) being moved.
    Pages without such elements pass."""
    from selenium.webdriver.common.by import By

    problems = []
    for index, element in enumerate(driver.find_elements(By.CSS_SELECTOR, "[data-interactive]")):
        name = element.get_attribute("id") or f"number {index + 1}"
        before = driver.execute_script(_SNAPSHOT, element)
        if not driver.execute_script(_MOVE_CONTROL, element):
            problems.append(f"interactive figure {name} has no control (input or select)")
            continue
        deadline = time.monotonic() + wait
        while driver.execute_script(_SNAPSHOT, element) == before:
            if time.monotonic() > deadline:
                problems.append(f"interactive figure {name} did not respond to its control")
                break
            time.sleep(0.05)
    return problems


def page_problems(driver, url):
    """Open ``url`` and run every check; the list of problems found (empty if none)."""
    driver.get_log("browser"), driver.get_log("performance")  # forget earlier pages
    driver.get(url)
    return (
        title_problems(driver)
        + image_problems(driver)
        + math_problems(driver)
        + interactive_problems(driver)
        + console_problems(driver)
        + request_problems(driver)
    )


# ---- fixtures: the built site, a local server, a browser ----


def serve(folder):
    """Serve ``folder`` on 127.0.0.1 at a free port in a daemon thread; returns the server."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def base_url(server):
    return f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The course built once, as its users build it; the build time is reported."""
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(ROOT / "lessons" / "build.py"), "--site", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    print(f"site built in {time.perf_counter() - start:.1f} s")
    return out


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    yield driver
    driver.quit()


# ---- the site ----


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
def test_no_page_names_another_host_to_load_from(site):
    """The quick check without a browser: no src= and no CSS url() point at http(s)."""
    import re

    loads = re.compile(r"""(?:src=|url\()["']?(https?:)?//(?!127\.0\.0\.1)""")
    offenders = [
        str(p.relative_to(site))
        for p in site.rglob("*")
        if p.suffix in (".html", ".css") and loads.search(p.read_text("utf-8", "replace"))
    ]
    assert not offenders, offenders


@needs_site_tools
@needs_browser
def test_every_page_passes_in_the_browser(site, browser):
    server = serve(site)
    try:
        pages = sorted(p.relative_to(site).as_posix() for p in site.glob("*.html"))
        problems = {page: page_problems(browser, base_url(server) + page) for page in pages}
        # The lessons' mathematics was really typeset, not merely absent.
        browser.get(base_url(server) + "05_scaled_dot_product_attention.html")
        math_problems(browser)
        assert browser.find_elements("css selector", "mjx-container"), "MathJax typeset nothing"
    finally:
        server.shutdown()
    assert not {page: found for page, found in problems.items() if found}


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
PLANTED = {
    "good.html": "<title>Good</title><img src='picture.svg'><p>x squared</p>"
    + SLIDER.format(id="live")
    + RESPONDS,
    "untitled.html": "<title></title><p>no title</p>",
    "broken_image.html": "<title>Broken</title><img src='missing.png'>",
    "external_script.html": "<title>External</title><script src='http://example.invalid/a.js'>"
    "</script>",
    "raw_math.html": "<title>Raw</title><p><span class='math'>\\(x^2\\)</span> and $$y$$</p>",
    "console_error.html": "<title>Error</title><script>console.error('planted')</script>",
    "dead_figure.html": "<title>Dead</title>" + SLIDER.format(id="dead"),
    "no_control.html": "<title>No control</title><div data-interactive id='bare'>5</div>",
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Small hand-made pages, each with one fault, served on 127.0.0.1."""
    folder = tmp_path_factory.mktemp("planted")
    (folder / "picture.svg").write_text(PICTURE)
    for name, body in PLANTED.items():
        (folder / name).write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<link rel='icon' href='picture.svg'></head>"
            f"<body>{body}</body></html>"
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
