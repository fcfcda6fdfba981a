"""The browser side of the site's tests: the checks a page must pass in
headless Chromium, one function each, a local server, the site built once per
test run and a browser to open it. Used by test_site.py (the pages in the
browser) and test_site_pages.py (the built pages read as text).

Needs the site extra (Sphinx, MyST-NB, the book theme, offline MathJax),
Selenium, and Debian's chromium and chromium-driver; the tests say which is
missing and skip without them.
"""

import atexit
import functools
import http.server
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMEDRIVER = pathlib.Path("/usr/bin/chromedriver")
INSTALL_BROWSER = "apt-get install chromium chromium-driver, and pip install selenium"
SITE_TOOLS = ["sphinx", "myst_nb", "sphinx_book_theme", "sphinxarg"]


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


# Every typeset formula whose content is wider than some box around it: the
# nearest such box must scroll (overflow-x auto or scroll), not clip (hidden or
# clip); a box that lets it overflow visibly hands the question to the next one.
_CLIPPED_MATH = """
const clipped = [];
for (const container of document.querySelectorAll('mjx-container')) {
  const formula = container.querySelector('mjx-math');
  if (!formula) continue;
  const width = formula.getBoundingClientRect().width;
  for (let box = container; box && box !== document.body; box = box.parentElement) {
    if (box.clientWidth + 1 >= width) continue;
    const overflow = getComputedStyle(box).overflowX;
    if (overflow === 'auto' || overflow === 'scroll') break;
    if (overflow === 'hidden' || overflow === 'clip') {
      clipped.push(container.textContent.slice(0, 40));
      break;
    }
  }
}
return clipped;
"""


def clipped_math_problems(driver):
    """No formula is cut off by a box narrower than it: it scrolls instead."""
    return [f"formula clipped, not scrollable: {text!r}"
            for text in driver.execute_script(_CLIPPED_MATH)]


# Whether the page's text has CJK characters, and the CJK faces the page has loaded.
_CJK_FONT = """
const done = arguments[arguments.length - 1];
const cjk = /[\\u2e80-\\u9fff\\uff00-\\uffef]/.test(document.body.innerText);
document.fonts.ready.then(() => done([cjk, Array.from(document.fonts)
  .filter(face => face.family.replace(/"/g, '') === 'minitrans CJK' && face.status === 'loaded')
  .length]));
"""


def cjk_font_problems(driver, wait=10.0):
    """A page with Chinese text (every page of the site: the sidebar's 术语表)
    has loaded the site's own CJK font, so that a machine without one shows
    characters, not boxes. A page without CJK text passes."""
    driver.set_script_timeout(wait)
    has_cjk, loaded = driver.execute_async_script(_CJK_FONT)
    return ["CJK text, but the site's CJK font is not loaded"] if has_cjk and not loaded else []


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
        + clipped_math_problems(driver)
        + cjk_font_problems(driver)
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


@functools.lru_cache(maxsize=None)
def built_site():
    """The course built once per test run, as its users build it (the build's
    own checks included), whichever test module asks first; the build time is
    reported."""
    out = pathlib.Path(tempfile.mkdtemp(prefix="minitrans-site-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
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


def new_browser():
    """Headless Chromium through Selenium, 1280 x 900, logging the console and the network."""
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
    return webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
