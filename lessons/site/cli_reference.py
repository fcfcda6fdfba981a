"""The ``minitrans`` parser as the guide's command-line reference shows it.

The guide's page ``command-line.md`` lists every command and flag with
sphinx-argparse's ``argparse`` directive, which reads this module's
``parser()``: the parser of ``minitrans.cli.main``, built afresh at every build,
so the page says what ``--help`` says. sphinx-argparse reads each help text and
description as reStructuredText, but they are written as plain text for a
terminal: ``<|endoftext|>`` would be a substitution reference, a ``*`` or a
``_`` markup, and Sphinx's smart quotes would turn the ``--`` of a flag into a
dash. ``parser()`` therefore shows each flag named in a text as code and
escapes every other character that reStructuredText reads as markup, and the
quotes.
"""

import argparse
import re

from minitrans.cli.main import build_parser

# A flag named in a help text: "--eval-every", not the "-" inside "held-out" or "e-5".
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
# Characters that reStructuredText reads as markup inside a paragraph, and the
# quotes, which Sphinx would curl (escaped, they stay as the terminal shows them).
MARKUP = re.compile(r"([\\`*_|<>\[\]'\"])")


def as_rst(text):
    """Plain ``text`` as reStructuredText that shows it as written, each flag as code."""
    pieces = FLAG.split(text)  # the text between flags, then a flag, then text, ...
    return "".join(f"``{piece}``" if index % 2 else MARKUP.sub(r"\\\1", piece)
                   for index, piece in enumerate(pieces))


def subparsers(parser):
    """The parsers of ``parser``'s subcommands, by name."""
    return {name: sub for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def subcommand_entries(parser):
    """The entries that name ``parser``'s subcommands, each with its one-line help."""
    return [entry for action in parser._actions
            if isinstance(action, argparse._SubParsersAction) for entry in action._choices_actions]


def escaped(parser):
    """``parser`` and its subcommands' parsers, their descriptions and help texts
    rewritten by ``as_rst`` (in place); returns ``parser``."""
    if parser.description:
        parser.description = as_rst(parser.description)
    for action in parser._actions + subcommand_entries(parser):
        if action.help and action.help != argparse.SUPPRESS:
            action.help = as_rst(action.help)
    for sub in subparsers(parser).values():
        escaped(sub)
    return parser


def parser():
    """The whole ``minitrans`` parser, its texts ready for sphinx-argparse."""
    return escaped(build_parser())
