"""``ccost eval SPEC... [--plan NAME] [--format text|json|yaml]``: evaluate plans, sweeps and comparisons.

SPEC is a file, a folder (every ``.ccost`` file below it that has something to evaluate; a library of
blocks such as ``specs/std/`` is skipped) or ``-`` (standard input; imports resolve from the current
folder), as for ``check``, ``report`` and ``fmt``.

Text is for people (aligned tables, units); JSON and YAML are the results document for scripts
(``docs/interface.md``, ``ccost schema --results``), byte-identical on re-runs (``ccost.output``). With
several specs, text prints one after the other, JSON prints a list of documents and YAML a stream of
documents (``---`` between them). Warnings from the checker go to stderr, results to stdout. Exit 0, or 2
when a spec has errors or a plan cannot be evaluated (the other specs are still printed).
"""

from __future__ import annotations

import argparse
import sys

HELP = "evaluate plans, sweeps, comparisons and searches"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC",
                        help="the .ccost files to evaluate; a folder means its specs (files that define no "
                             "plan, sweep, comparison or search are skipped); `-` reads standard input")
    parser.add_argument("--plan", metavar="NAME", help="evaluate only this plan (no sweeps or comparisons)")
    parser.add_argument("--format", choices=("text", "json", "yaml"), default="text",
                        help="text: readable tables (default); json/yaml: the results document (a list of "
                             "documents, or a YAML stream, for several specs)")
    from ccost.commands import runopts

    runopts.add_arguments(parser)


def load(path: str, text: str | None = None):
    """Check the spec (``text`` when given, as if it were the file ``path``): (spec, sources). Errors raise
    CcostError carrying the sources (so the CLI shows the source lines); warnings are printed to stderr."""
    from ccost.check import check_file, check_text
    from ccost.diagnostics import CcostError, Severity, render_all, use_colour

    result = check_file(path) if text is None else check_text(text, path)
    errors = [d for d in result.diagnostics if d.is_error]
    if result.spec is None or errors:
        exc = CcostError(result.diagnostics)
        exc.sources = result.sources  # type: ignore[attr-defined]
        raise exc
    warnings = [d for d in result.diagnostics if d.severity is Severity.WARNING]
    if warnings:
        print(render_all(warnings, result.sources, colour=use_colour(sys.stderr)), file=sys.stderr)
    return result.spec, result.sources


def with_sources(exc, sources: dict[str, str]):
    """Attach the spec's sources to an evaluation error, for the caret lines."""
    if getattr(exc, "sources", None) is None:
        exc.sources = sources
    return exc


def document(path: str, plan: str | None, text: str | None = None, skip_empty: bool = False) -> dict | None:
    """The results document of one spec; None when ``skip_empty`` and the spec evaluates nothing."""
    from ccost import evaluate
    from ccost.commands.paths import evaluates_something
    from ccost.diagnostics import CcostError
    from ccost.progress import Bar

    spec, sources = load(path, text)
    if skip_empty and not evaluates_something(spec):
        return None
    try:
        if plan:
            spec = evaluate.plan_only(spec, plan)
        with Bar(sys.stderr) as bar:  # drawn only on a terminal, for searches longer than a second
            return evaluate.results_document(evaluate.evaluate(spec, progress=bar))
    except CcostError as exc:
        raise with_sources(exc, sources)


def run(args: argparse.Namespace) -> int:
    from ccost.commands import runopts

    with runopts.execution(args):  # --jobs / --scheduler: where the searches run
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ccost import output
    from ccost.commands.paths import STDIN, expand, failed_one_of_several, read_stdin, say_skipped
    from ccost.diagnostics import CcostError

    docs, status = [], 0
    specs = expand(args.specs)
    for arg in specs:
        try:
            if arg.path == STDIN:
                doc = document("<stdin>", args.plan, read_stdin())
            else:
                doc = document(arg.path, args.plan, skip_empty=arg.from_folder)
        except CcostError as exc:
            status = failed_one_of_several(exc, len(specs))
            continue
        if doc is None:
            say_skipped(arg.path)
            continue
        docs.append(doc)
    several = len(specs) > 1
    if args.format == "json":
        text = output.to_json(docs if several else docs[0]) if docs or several else ""
    elif args.format == "yaml":
        text = "---\n".join(output.to_yaml(d) for d in docs)
    else:
        from ccost.diagnostics import escape_controls

        # titles may carry ESC, BEL, ... (JSON/YAML escape them by their own rules)
        text = escape_controls("\n".join(output.to_text(d) for d in docs))
    sys.stdout.write(text)
    return status
