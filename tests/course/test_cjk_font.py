"""The site's own CJK font (lessons/site/static/fonts, loaded by minitrans.css).

On a machine without a Chinese font the glossary's 中文 column and the
sidebar's 术语表 would show as boxes, so the site ships Noto Sans CJK SC cut
down to the characters it uses. These tests read the font files' character
maps (fontTools) and check that every CJK character that can reach a page,
from the glossary, the README (the home page and the sidebar's titles), the
user guide, the lessons and their outputs, is in both weights, that the
stylesheet loads the files for those characters, and that the licence travels
with them. A character the font lacks is shown caught on a planted text."""

import pathlib
import re

import pytest
from tests.conftest import load_module

fontTools = pytest.importorskip("fontTools", reason='the font tests need fonttools: ".[dev]"')
from fontTools.ttLib import TTFont  # noqa: E402

SITE = pathlib.Path(__file__).resolve().parents[2] / "lessons" / "site"
make_font = load_module(SITE / "make_cjk_font.py", "make_cjk_font")
CSS = (SITE / "static" / "minitrans.css").read_text(encoding="utf-8")
WEIGHTS = ("regular", "bold")


def covered(weight):
    """The characters the bundled font of ``weight`` has a glyph for."""
    return {chr(code) for code in TTFont(make_font.font_file(weight)).getBestCmap()}


def missing(text, weight):
    """The CJK characters of ``text`` that the font of ``weight`` lacks, sorted."""
    return sorted(set(make_font.CJK.findall(text)) - covered(weight))


def unicode_ranges(css):
    """The code points the stylesheet's @font-face rules say the font is for."""
    ranges = set()
    for rule in re.findall(r"unicode-range:([^;]+);", css):
        for low, high in re.findall(r"U\+([0-9A-Fa-f]+)-([0-9A-Fa-f]+)", rule):
            ranges.add((int(low, 16), int(high, 16)))
    return ranges


def test_the_site_uses_cjk_characters_at_all():
    used = make_font.characters_used()
    assert {"术", "语", "表", "中", "文"} <= used and len(used) > 100


@pytest.mark.parametrize("weight", WEIGHTS)
def test_every_cjk_character_of_the_site_is_in_the_bundled_font(weight):
    lacking = sorted(make_font.characters_used() - covered(weight))
    assert not lacking, (f"cjk-subset-{weight}.woff lacks {''.join(lacking)}: "
                         "make it again with lessons/site/make_cjk_font.py (see its docstring)")


def test_a_character_the_font_lacks_is_caught():
    assert missing("术语表 and 龘", "regular") == ["龘"]
    assert missing("术语表", "bold") == []


def test_the_stylesheet_loads_both_weights_for_every_character_used():
    for weight in WEIGHTS:
        name = make_font.font_file(weight).name
        assert f'url("fonts/{name}")' in CSS, f"minitrans.css does not load {name}"
    ranges = unicode_ranges(CSS)
    outside = [c for c in make_font.characters_used()
               if not any(low <= ord(c) <= high for low, high in ranges)]
    assert not outside, f"outside the @font-face unicode-range: {''.join(sorted(outside))}"
    assert '"minitrans CJK", var(--pst-font-family-base-system)' in CSS


def test_the_fonts_licence_is_bundled_with_them():
    licence = (make_font.FONTS / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Adobe" in licence
    names = TTFont(make_font.font_file("regular"))["name"]
    assert "Open Font License" in names.getDebugName(13)
