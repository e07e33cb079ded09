"""``ccost schema``: print the language reference generated from ``ccost.schema``; with ``--results``, the
JSON Schema of the results document (``ccost.results``).

``docs/language.md`` is ``ccost schema``'s output and the key table of ``docs/interface.md`` is
``ccost schema --results --format markdown``'s, both committed; tests fail when they differ, and these
commands bring them back in step. ``ccost schema --results > results.schema.json`` gives a schema to
validate ``ccost eval --format json`` output against (any JSON Schema draft 2020-12 validator).
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "print the language reference, or (--results) the JSON Schema of the results document"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", action="store_true",
                        help="the results document of `ccost eval --format json|yaml` instead of the language: "
                             "its JSON Schema (default) or, with --format markdown, the key table of "
                             "docs/interface.md")
    parser.add_argument("--format", choices=["markdown", "json"], default=None,
                        help="markdown (the language reference, the default) or json (with --results, the "
                             "default: a JSON Schema, draft 2020-12)")


def run(args: argparse.Namespace) -> int:
    if args.results:
        from ccost import results

        if args.format == "markdown":
            sys.stdout.write(results.markdown())
        else:
            sys.stdout.write(json.dumps(results.json_schema(), indent=2, ensure_ascii=False) + "\n")
        return 0
    if args.format == "json":  # a usage error, like argparse's own (exit 2)
        print("ccost schema: the language reference is markdown only; `--format json` goes with --results "
              "(the JSON Schema of the results document)", file=sys.stderr)
        return 2
    from ccost.schema import markdown

    print(markdown(), end="")
    return 0
