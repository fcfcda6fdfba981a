"""The check that the built command-line reference (``guide/command-line.html``,
made by sphinx-argparse from ``minitrans.cli.main.build_parser``) shows every
command and flag of the ``minitrans`` parser: ``reference_problems`` walks
the parser and names each command and flag that the page lacks, one line
each. It reads the page's HTML as text, without a browser.
"""

import argparse
import html.parser
import pathlib
import re


class Sections(html.parser.HTMLParser):
    """A built page's sections: for each ``<section>``, its heading's text
    (without the heading's own link, "#" or "¶") and the text of every
    ``<kbd>`` inside it (sphinx-argparse writes each option as one, "--steps"
    or "-o, --out"); and the ``<kbd>`` texts of the whole page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.sections, self.page_kbd = [], [], []
        self.heading = self.kbd = None
        self.in_headerlink = False

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.open.append({"heading": "", "kbd": []})
            self.sections.append(self.open[-1])
        elif re.fullmatch(r"h[1-6]", tag) and self.open and not self.open[-1]["heading"]:
            self.heading = []
        elif tag == "kbd":
            self.kbd = []
        elif tag == "a" and "headerlink" in (dict(attrs).get("class") or "").split():
            self.in_headerlink = True

    def handle_endtag(self, tag):
        if tag == "section" and self.open:
            self.open.pop()
        elif re.fullmatch(r"h[1-6]", tag) and self.heading is not None:
            self.open[-1]["heading"] = "".join(self.heading).strip()
            self.heading = None
        elif tag == "kbd" and self.kbd is not None:
            text = "".join(self.kbd).strip()
            self.page_kbd.append(text)
            for section in self.open:
                section["kbd"].append(text)
            self.kbd = None
        elif tag == "a":
            self.in_headerlink = False

    def handle_data(self, data):
        for collecting in (self.heading, self.kbd):
            if collecting is not None and not self.in_headerlink:
                collecting.append(data)


def commands(parser, name=None):
    """``parser`` and every subcommand's parser below it, by their full names
    ("minitrans", "minitrans train", ...)."""
    name = name or parser.prog
    found = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found.update(commands(sub, f"{name} {sub_name}"))
    return found


def option_strings(parser):
    """Every option string of ``parser`` ("--steps", ...) but those of help,
    which every command has and the reference leaves out, and hidden ones."""
    return [string for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
            and action.help != argparse.SUPPRESS for string in action.option_strings]


def reference_problems(page, parser):
    """What the built command-line reference ``page`` lacks of ``parser``: a
    section headed by each subcommand's full name ("minitrans train"), and in
    it each of its option strings; the top command's options anywhere on the page."""
    reader = Sections()
    reader.feed(pathlib.Path(page).read_text(encoding="utf-8"))
    name, problems = pathlib.Path(page).name, []
    for command, command_parser in commands(parser).items():
        if command == parser.prog:
            shown = reader.page_kbd
        else:
            sections = [s for s in reader.sections if s["heading"] == command]
            if not sections:
                problems.append(f"{name}: the command-line reference has no section for "
                                f"'{command}'")
                continue
            shown = [text for section in sections for text in section["kbd"]]
        flags = {flag for text in shown for flag in re.split(r"[,\s]+", text)}
        problems += [f"{name}: the command-line reference lacks '{command} {flag}'"
                     for flag in option_strings(command_parser) if flag not in flags]
    return problems
