"""``ccost diff [REV] SPEC`` and ``ccost diff OLD.ccost NEW.ccost``: what a change did to a plan's numbers.

With a revision (default ``HEAD``), the old side is the spec *and every file it imports* as committed at
``REV``, read through ``git`` (``ccost.gitio.GitReader``; nothing is checked out), and the new side is the
working tree. With two files, the first is the old side. Both sides are checked and evaluated; the diff
(``ccost.diff``) lists inputs, plans, results, checklist statuses and recommendations that changed.

When the first argument names an existing file, the two-file form is meant; otherwise it is a revision.

Exit status: 0 (whether or not anything changed: a diff is information, the gate is ``check --policy``);
2 when a side has errors, a plan cannot be evaluated, or git cannot answer.
"""

from __future__ import annotations

import argparse
import os
import sys

from ccost.diagnostics import CcostError, escape_controls, render_all, use_colour

HELP = "what a change to a spec did to its inputs and results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("ccost diff [--format text|markdown|json] [--threshold PERCENT | --all] [REV] SPEC\n"
                    "       ccost diff [--format text|markdown|json] [--threshold PERCENT | --all] OLD.ccost "
                    "NEW.ccost")
    parser.add_argument("args", nargs="+", metavar="ARG",
                        help="SPEC (HEAD against the working tree), REV SPEC (that revision against the "
                             "working tree), or OLD.ccost NEW.ccost (two files)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                        help="text for a terminal (default), markdown for a pull-request comment, json for "
                             "scripts")
    parser.add_argument("--threshold", metavar="PERCENT", type=_percent, default=None,
                        help="leave out results that changed by less than this share of their old value "
                             "(default 0.1; inputs, statuses and rankings are always listed)")
    parser.add_argument("--all", action="store_true",
                        help="list every result that changed, however little (the same as --threshold 0)")
    from ccost.commands import runopts

    runopts.add_arguments(parser)


def _percent(text: str) -> float:
    value = float(text.strip().rstrip("%").strip())
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text}: a percentage from 0 to under 100, like 0.1")
    return value / 100


def _side(label: str, path: str, reader=None, where: str = ""):
    """Check and evaluate one side: a ``ccost.diff.Side``. Errors raise CcostError with their sources and
    a note saying which side they come from."""
    from ccost.check import check_file
    from ccost.diff import Side
    from ccost.evaluate import evaluate, results_document

    result = check_file(path, reader)
    if result.spec is None or result.errors:
        exc = CcostError(result.errors or result.diagnostics)
        exc.sources = result.sources  # type: ignore[attr-defined]
        exc.side = where or label  # type: ignore[attr-defined]
        raise exc
    import sys

    from ccost.progress import Bar

    try:
        with Bar(sys.stderr) as bar:  # a long search's bar, on a terminal only
            results = evaluate(result.spec, progress=bar)
    except CcostError as exc:
        exc.sources = getattr(exc, "sources", None) or result.sources  # type: ignore[attr-defined]
        exc.side = where or label  # type: ignore[attr-defined]
        raise
    return Side(label, result.spec, results_document(results))


def sides(args: list[str]):
    """(old Side, new Side) for the command-line arguments. Raises CcostError (E502) for bad usage or git
    trouble, and the checker's errors for a side that does not check."""
    from ccost.diagnostics import error
    from ccost.diff import Side

    if len(args) > 2:
        raise CcostError(error("E502", f"ccost diff takes one or two arguments, got {len(args)}",
                               help="ccost diff [REV] SPEC, or ccost diff OLD.ccost NEW.ccost"))
    if len(args) == 2 and os.path.isfile(args[0]):
        old, new = args
        return _side(old, old, where=f"the old file {old}"), _side(new, new, where=f"the new file {new}")
    rev, spec = (args[0], args[1]) if len(args) == 2 else ("HEAD", args[0])
    if not os.path.isfile(spec):
        raise CcostError(error("E502", f"{spec}: no such file in the working tree",
                               help="ccost diff compares a committed spec with the one on disk; give the "
                                    "path of the spec as it is now"))
    from ccost.gitio import GitReader

    reader = GitReader(rev, spec)
    new = _side("working tree", spec, where=f"the working tree's {spec}")
    label = f"{rev}:{reader.relpath(spec)}"
    if not reader.exists(spec):
        return Side(label, None, None), new
    return _side(label, spec, reader, where=f"{spec} as of {reader.describe()}"), new


def run(args: argparse.Namespace) -> int:
    from ccost.commands import runopts

    with runopts.execution(args):  # --jobs / --scheduler: where the searches run
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ccost.diff import compare, to_document, to_markdown, to_text

    try:
        old, new = sides(args.args)
    except CcostError as exc:
        side = getattr(exc, "side", None)
        if side:
            print(f"ccost diff: {side} has errors:", file=sys.stderr)
        print(render_all(exc.diagnostics, getattr(exc, "sources", None), use_colour(sys.stderr)),
              file=sys.stderr)
        return 2
    from ccost.diff import DEFAULT_THRESHOLD

    threshold = 0.0 if args.all else (DEFAULT_THRESHOLD if args.threshold is None else args.threshold)
    d = compare(old, new, threshold)
    if args.format == "json":
        from ccost.output import to_json

        sys.stdout.write(to_json(to_document(d)))
    elif args.format == "markdown":
        sys.stdout.write(escape_controls(to_markdown(d)))
    else:
        sys.stdout.write(escape_controls(to_text(d)))  # titles and sources may carry ESC, BEL, ...
    return 0
