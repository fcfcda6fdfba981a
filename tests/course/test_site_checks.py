"""The checks ``lessons/build.py --site`` runs after Sphinx (lessons/site_checks.py,
lessons/site/reference_check.py and lessons/site/link_checks.py).

Each check is shown catching its own planted defect: a Markdown heading left
in a code cell (lesson 12's section 6), a Markdown table shown as a paragraph
of "|" (lesson 18's toy Table 3), a stray "$" beside a formula (lesson 14), a
command or flag missing from the command-line reference, and a broken link
in a Markdown file (a missing file, a missing anchor, a page of the site
linking out of it, a repository path written as code that does not exist). A
planted page with none of them passes, the real lesson sources pass, and the
build fails with one line per problem. That the real built site passes is
tested where the site is built once, test_site.py and test_site_pages.py.
The guide's contents order its pages, and its Python examples run.
"""

import argparse
import json
import pathlib
import re

import pytest
from tests.conftest import load_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"
README = (LESSONS / "README.md").read_text(encoding="utf-8")
checks = load_module(LESSONS / "site_checks.py", "site_checks")
reference = load_module(LESSONS / "site" / "reference_check.py", "reference_check")
links = load_module(LESSONS / "site" / "link_checks.py", "link_checks")
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


# ---- the command-line reference ----


def small_parser():
    """A command with two subcommands, as minitrans.cli.main builds its own."""
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--version", action="version", version="1")
    commands = parser.add_subparsers(dest="command")
    train = commands.add_parser("train")
    train.add_argument("task")
    train.add_argument("--steps", type=int)
    train.add_argument("-o", "--out")
    train.add_argument("--hidden", help=argparse.SUPPRESS)
    commands.add_parser("doctor").add_argument("--device")
    return parser


def reference_page(sections, top="<kbd>--version</kbd>"):
    """A built reference as sphinx-argparse writes one: a section per command,
    headed by its full name with the theme's "#" link, each option a <kbd>."""
    body = "".join(
        f'<section id="{name}"><h4>{name}<a class="headerlink" href="#x">#</a></h4>'
        + "".join(f"<dl><dt><kbd>{flag}</kbd></dt><dd><p>help</p></dd></dl>" for flag in flags)
        + "</section>" for name, flags in sections.items())
    return f"<html><body><section><h2>Every command</h2>{top}{body}</section></body></html>"


GOOD_REFERENCE = {"tool train": ["--steps", "-o, --out"], "tool doctor": ["--device"]}


@pytest.mark.parametrize("sections, top, expected", [
    (GOOD_REFERENCE, "<kbd>--version</kbd>", []),
    ({"tool train": ["--steps"], "tool doctor": ["--device"]}, "<kbd>--version</kbd>",
     ["command-line.html: the command-line reference lacks 'tool train -o'",
      "command-line.html: the command-line reference lacks 'tool train --out'"]),
    ({"tool train": ["--steps", "-o, --out"]}, "<kbd>--version</kbd>",
     ["command-line.html: the command-line reference has no section for 'tool doctor'"]),
    # a flag shown under another command does not count for this one
    ({"tool train": ["--steps", "-o, --out", "--device"], "tool doctor": []},
     "<kbd>--version</kbd>",
     ["command-line.html: the command-line reference lacks 'tool doctor --device'"]),
    (GOOD_REFERENCE, "", ["command-line.html: the command-line reference lacks 'tool --version'"]),
])
def test_the_reference_check_names_each_missing_command_and_flag(tmp_path, sections, top,
                                                                expected):
    page = tmp_path / "command-line.html"
    page.write_text(reference_page(sections, top), encoding="utf-8")
    assert reference.reference_problems(page, small_parser()) == expected


def test_the_reference_shows_help_texts_as_the_terminal_does():
    """sphinx-argparse reads help as reStructuredText: each flag becomes code,
    markup characters and quotes are escaped, nothing else changes."""
    cli_reference = load_module(LESSONS / "site" / "cli_reference.py", "cli_reference")
    assert cli_reference.as_rst("stop at --steps (default: 'a_b' or <|endoftext|>), e-5") == (
        r"stop at ``--steps`` (default: \'a\_b\' or \<\|endoftext\|\>), e-5")
    parser = cli_reference.parser()
    train = reference.commands(parser)["minitrans train"]
    assert all("--" not in text.replace("``--", "") for text in help_texts(train))


def help_texts(parser):
    return [action.help for action in parser._actions if action.help] + [parser.description]


# ---- links in Markdown files ----

PLANTED_MARKDOWN = {
    "README.md": "# Top\n\n## Start here\n\nSee "
                 "[the guide](site/guide.md#the-rules-what-is-refused) and [start](#start-here), "
                 "[a folder](site/), [a file](code.py#L3), [PyTorch](https://pytorch.org/nowhere) "
                 "and `code.py`.\n",
    "code.py": "x = 1\n",
    "site/guide.md": "# Guide\n\n## The rules: `what` *is* refused\n\n| a | b |\n| --- | --- |\n"
                     "| [lesson](01_lesson.ipynb#a-section) | [up](#guide) |\n",
    "site/01_lesson.ipynb": json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["# Lesson\n", "\n", "## A section\n"]},
        {"cell_type": "code", "source": ["# ## Not a heading\n"]}]}),
    "bad.md": "# Bad\n\n[gone](missing.md) and [no anchor](site/guide.md#nowhere)\n\n"
              "<a href='site/gone.html'>html</a>, `code.py` and `examples/gone.py`\n",
    "site/leaves.md": "# Leaves\n\nThe [code](../code.py) and [a heading](#not-here).\n",
}


@pytest.fixture
def markdown(tmp_path):
    for name, text in PLANTED_MARKDOWN.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "examples").mkdir()
    return tmp_path


def test_good_links_pass(markdown):
    files = [markdown / name for name in ("README.md", "site/guide.md")]
    assert links.link_problems(files, markdown, site=markdown / "site") == []


def test_each_broken_link_is_named(markdown):
    problems = links.link_problems([markdown / "bad.md", markdown / "site" / "leaves.md"],
                                    markdown, site=markdown / "site")
    assert problems == [
        "bad.md, line 3: link 'missing.md' leads to no file",
        "bad.md, line 3: link 'site/guide.md#nowhere' names no heading of guide.md",
        "bad.md, line 5: link 'site/gone.html' leads to no file",
        "bad.md, line 5: `examples/gone.py` names no file of the repository",
        "site/leaves.md, line 3: link '../code.py' leads out of the website's pages (site/): "
        "write a repository path as code, `like/this.py`",
        "site/leaves.md, line 3: link '#not-here' names no heading of leaves.md",
    ]


def test_headings_get_githubs_anchors(markdown):
    assert links.anchors(markdown / "site" / "guide.md") == {"guide", "the-rules-what-is-refused"}
    assert links.anchors(markdown / "site" / "01_lesson.ipynb") == {"lesson", "a-section"}
    twice = markdown / "twice.md"
    twice.write_text("# Notes\n\n## Notes\n\n### CPU and GPU: the backends\n", encoding="utf-8")
    assert links.anchors(twice) == {"notes", "notes-1", "cpu-and-gpu-the-backends"}


def test_the_markdown_to_check_is_every_readme_and_the_guide():
    files = [p.relative_to(ROOT).as_posix() for p in links.markdown_to_check(ROOT)]
    assert {"README.md", "benchmarks/README.md", "lessons/README.md"} <= set(files)
    assert "lessons/guide/index.md" in files and "lessons/guide/command-line.md" in files
    assert not any(name.startswith((".venv/", "build/")) for name in files)


def test_the_build_fails_on_a_broken_link_or_a_flag_missing_from_the_reference(tmp_path):
    """check_guide on a planted repository (not a git checkout: every README
    is found by walking it) and a planted built reference without --lr."""
    (tmp_path / "README.md").write_text("# Top\n\n[guide](lessons/guide/index.md#nope)\n")
    (tmp_path / "lessons" / "guide").mkdir(parents=True)
    (tmp_path / "lessons" / "guide" / "index.md").write_text("# Guide\n\n[Top](../../README.md)\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "README.md").write_text("[not ours](missing.md)\n")
    out = tmp_path / "site"
    (out / "guide").mkdir(parents=True)
    from minitrans.cli.main import build_parser

    flags = {name: [s for s in reference.option_strings(parser) if s != "--lr"]
             for name, parser in reference.commands(build_parser()).items()}
    page = reference_page({name: found for name, found in flags.items() if name != "minitrans"},
                          top="".join(f"<kbd>{flag}</kbd>" for flag in flags["minitrans"]))
    (out / "guide" / "command-line.html").write_text(page, encoding="utf-8")
    with pytest.raises(SystemExit) as failure:
        build.check_guide(out, root=tmp_path)
    assert str(failure.value.code).splitlines() == [
        "build.py: README.md, line 3: link 'lessons/guide/index.md#nope' names no heading of "
        "index.md",
        "build.py: lessons/guide/index.md, line 3: link '../../README.md' leads out of the "
        "website's pages (lessons/): write a repository path as code, `like/this.py`",
        "build.py: command-line.html: the command-line reference lacks 'minitrans train --lr'",
    ]


# ---- the guide in the site ----


def test_the_guide_follows_its_contents_page():
    assert build.guide_pages("[A](a.md), [B](b-c.md#x), [A again](a.md), [index](index.md)") == [
        "guide/index", "guide/a", "guide/b-c"]
    pages = build.guide_pages()
    assert pages[0] == "guide/index" and "guide/command-line" in pages
    index = build.site_index(README, build.lesson_sources(), guide=["guide/index", "guide/a"])
    block = index.split(":caption: User guide\n", 1)[1].split("```", 1)[0]
    assert block.split() == ["guide/index", "guide/a"]
    assert index.index("User guide") < index.index(":caption: Reference")


def test_every_python_example_of_the_guide_runs():
    """The guide's Python examples, on NumPy. Those for a GPU or PyTorch's
    processes are not run here: tests/project/test_readme.py checks their
    imports, and the parity tests run the bridge."""
    blocks = [block for page in sorted((LESSONS / "guide").glob("*.md"))
              for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"),
                                      re.S)]
    ran = 0
    for block in blocks:
        if "torch" in block or 'use("cupy")' in block:
            continue
        exec(block, {"print": lambda *args: None})
        ran += 1
    assert ran >= 3


# ---- the benchmarks page, from benchmarks/results/ ----

results_page = load_module(LESSONS / "site" / "benchmark_results.py", "benchmark_results")
RUN = """# Every task to its target

- Date: {date}
- Command: `python benchmarks/task_targets.py`

| task | steps |
| --- | --- |
| copy | {steps} |

## What it means

It costs $5, not $6: [the README](../../README.md), [PyTorch](https://pytorch.org).
`$x$` and

```
# a comment, [not](a link) $
```
"""


def test_without_results_each_script_says_no_run_is_recorded(tmp_path):
    for results in (tmp_path / "no such folder", tmp_path):
        text = results_page.latest_results(results)
        for name, script in results_page.SUITE.items():
            assert (f"## `{script}`\n\nNo run is recorded: `benchmarks/results/{name}/` holds no "
                    "results file.") in text
        assert "Investigations" not in text


def test_the_page_shows_the_newest_run_of_each_folder(tmp_path):
    folder = tmp_path / "task_targets"
    folder.mkdir()
    for date, steps in (("2031-01-01-090000", 300), ("2031-01-02-140509", 200)):
        (folder / f"{date}-abc1234.md").write_text(RUN.format(date=date, steps=steps), "utf-8")
    (folder / "README.md").write_text("# not a run\n", encoding="utf-8")
    (tmp_path / "step_breakdown").mkdir()
    (tmp_path / "step_breakdown" / "2030-12-20-100000-unknown.md").write_text(
        "# Where a step's time goes\n\n- Date: 2030-12-20\n", encoding="utf-8")
    text = results_page.latest_results(tmp_path)
    section = text.split("## Every task to its target\n")[1].split("\n## `")[0]
    assert section.startswith(
        "\nFrom `benchmarks/task_targets.py`, the latest of 2 runs: "
        "`benchmarks/results/task_targets/2031-01-02-140509-abc1234.md` (the older ones are "
        "in the same folder).\n")
    assert "| copy | 200 |" in section and "| copy | 300 |" not in section
    assert "\n### What it means\n" in section
    assert r"It costs \$5, not \$6: the README, [PyTorch](https://pytorch.org)." in section
    assert "`$x$` and" in section and "# a comment, [not](a link) $" in section
    assert "No run is recorded: `benchmarks/results/ablations/`" in text
    assert ("| `step_breakdown` | `2030-12-20-100000-unknown.md` | Where a step's time goes |"
            in text.split("## Investigations")[1])


def test_a_results_files_headings_go_one_level_down_without_a_gap():
    text = "# Title\n\n### Skips a level\n\n###### Deep\n\n## Back\n\n```\n# code\n```\n"
    assert results_page.as_section(text) == (
        "## Title\n\n### Skips a level\n\n#### Deep\n\n### Back\n\n```\n# code\n```\n")


def test_the_page_needs_its_marker():
    assert results_page.page(f"# Benchmarks\n\n{results_page.MARKER}\n", "nowhere").startswith(
        "# Benchmarks\n\n## `benchmarks/task_targets.py`")
    with pytest.raises(SystemExit, match="lacks the line"):
        results_page.page("# Benchmarks\n", "nowhere")
    guide = (LESSONS / "guide" / "benchmarks.md").read_text(encoding="utf-8")
    assert results_page.MARKER in guide
