"""``ccost schema``: print the language reference generated from ``ccost.schema``.

``docs/language.md`` is this output, committed; a test fails when the two differ, and
``ccost schema > docs/language.md`` brings the file back in step.
"""

from __future__ import annotations

import argparse

HELP = "print the language reference generated from the schema"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=["markdown"], default="markdown",
                        help="output format (markdown, the format of docs/language.md)")


def run(args: argparse.Namespace) -> int:
    from ccost.schema import markdown

    print(markdown(), end="")
    return 0
