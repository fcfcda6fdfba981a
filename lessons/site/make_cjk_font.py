"""Make the site's CJK font: Noto Sans CJK SC cut down to the characters the course uses.

Few readers' machines lack a Latin font, but many lack a Chinese one, and then
the glossary's 中文 column and the sidebar's 术语表 show as boxes. The site
therefore ships its own font for CJK text, loaded by ``static/minitrans.css``
for those characters only (its ``unicode-range``). The whole of Noto Sans CJK
is some 20 MB a weight; the few hundred characters the course uses are about
90 kB, so the subset is what is committed
(``static/fonts/cjk-subset-regular.woff`` and ``-bold.woff``, with the font's
licence, the SIL Open Font License 1.1, in ``static/fonts/OFL.txt``).

When a lesson or the glossary gains a Chinese character the font lacks,
tests/course/test_cjk_font.py fails and names it; make the font again:

    apt-get download fonts-noto-cjk && dpkg-deb -x fonts-noto-cjk_*.deb noto
    python lessons/site/make_cjk_font.py noto/usr/share/fonts/opentype/noto

Needs fontTools (``pip install fonttools``; matplotlib brings it). Building the
site needs neither this script nor fontTools: it copies the committed files.
"""

import pathlib
import re
import sys

SITE = pathlib.Path(__file__).resolve().parent
LESSONS = SITE.parent
ROOT = LESSONS.parent
FONTS = SITE / "static" / "fonts"
# Debian's Noto Sans CJK collections, one a weight; the face taken from each is FAMILY.
COLLECTIONS = {"regular": "NotoSansCJK-Regular.ttc", "bold": "NotoSansCJK-Bold.ttc"}
FAMILY = "Noto Sans CJK SC"
# The CJK blocks: radicals, CJK punctuation, kana, ideographs, compatibility
# ideographs, vertical forms, full-width forms ("（" and "，" in the glossary).
CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe10-\ufe4f\uff00-\uffef]")


def site_sources():
    """Every file whose text can reach a page of the site: the lessons (their
    sources and their executed notebooks, outputs included), the Markdown pages
    (the README becomes the home page and gives the sidebar its titles, the
    glossary, the user guide), what the guide's generated pages read (the
    command line's parsers, the benchmarks' results) and the site's own
    configuration, templates and styles."""
    lessons = sorted(LESSONS.glob("[0-9][0-9]_*.py")) + sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    pages = sorted(LESSONS.glob("*.md")) + sorted((LESSONS / "guide").glob("*.md"))
    generated = (sorted((ROOT / "minitrans" / "cli").glob("*.py"))
                 + sorted((ROOT / "benchmarks" / "results").rglob("*.md")))
    site = sorted(p for p in SITE.rglob("*") if p.suffix in (".py", ".html", ".css", ".js"))
    return lessons + pages + generated + site


def characters_used():
    """The set of CJK characters in the site's sources."""
    found = set()
    for path in site_sources():
        found.update(CJK.findall(path.read_text(encoding="utf-8")))
    return found


def font_file(weight):
    return FONTS / f"cjk-subset-{weight}.woff"


def subset(collection, characters, out):
    """Write the Simplified Chinese face of ``collection`` (a .ttc), cut down to
    ``characters``, as WOFF (zlib-compressed: no extra module, unlike WOFF2's Brotli)."""
    from fontTools import subset as fonttools_subset
    from fontTools.ttLib import TTCollection

    fonts = TTCollection(str(collection), lazy=False).fonts
    font = next(f for f in fonts if f["name"].getDebugName(1) == FAMILY)
    options = fonttools_subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]  # keep the shaping the browser may ask for
    options.name_IDs = ["*"]  # keep the copyright and licence strings
    subsetter = fonttools_subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in characters))
    subsetter.subset(font)
    font.flavor = "woff"
    font.save(str(out))


def main(arguments):
    if len(arguments) != 1:
        raise SystemExit(__doc__)
    folder = pathlib.Path(arguments[0])
    characters = characters_used()
    FONTS.mkdir(parents=True, exist_ok=True)
    for weight, name in COLLECTIONS.items():
        subset(folder / name, characters, font_file(weight))
        size = font_file(weight).stat().st_size / 1e3
        print(f"{font_file(weight).name}: {len(characters)} characters, {size:.0f} kB")


if __name__ == "__main__":
    main(sys.argv[1:])
