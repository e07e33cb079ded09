"""``ccost eval SPEC [--plan NAME] [--format text|json|yaml]``: evaluate plans, sweeps and comparisons.

Text is for people (aligned tables, units); JSON and YAML are the INTERFACE.md results document for
scripts, byte-identical on re-runs (``ccost.output``). Warnings from the checker go to stderr, results to
stdout. Exit 0, or 2 when the spec has errors or a plan cannot be evaluated.
"""

from __future__ import annotations

import argparse
import sys

HELP = "evaluate plans, sweeps, comparisons and searches"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="the .ccost file to evaluate")
    parser.add_argument("--plan", metavar="NAME", help="evaluate only this plan (no sweeps or comparisons)")
    parser.add_argument("--format", choices=("text", "json", "yaml"), default="text",
                        help="text: readable tables (default); json/yaml: the results document")


def load(path: str):
    """Check the spec: (spec, sources). Errors raise CcostError carrying the sources (so the CLI shows the
    source lines); warnings are printed to stderr here."""
    from ccost.check import check_file
    from ccost.diagnostics import CcostError, Severity, render_all, use_colour

    result = check_file(path)
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


def plan_only(spec, name: str):
    """The spec narrowed to one plan: that plan, no sweeps or comparisons. Unknown name: E101."""
    from dataclasses import replace
    from difflib import get_close_matches

    from ccost.diagnostics import CcostError, error

    if name not in spec.plans:
        close = get_close_matches(name, list(spec.plans), n=1)
        raise CcostError(error("E101", f"no plan named `{name}` in {spec.path}", None,
                               f"did you mean `{close[0]}`?" if close else
                               ("plans: " + ", ".join(spec.plans)) if spec.plans else "the spec has no plans"))
    return replace(spec, sweeps={}, compares={}, searches={}, local_plans=(name,))


def run(args: argparse.Namespace) -> int:
    from ccost import evaluate, output
    from ccost.diagnostics import CcostError

    spec, sources = load(args.spec)
    try:
        if args.plan:
            spec = plan_only(spec, args.plan)
        from ccost.progress import Bar

        with Bar(sys.stderr) as bar:  # drawn only on a terminal, for searches longer than a second
            doc = evaluate.results_document(evaluate.evaluate(spec, progress=bar))
    except CcostError as exc:
        raise with_sources(exc, sources)
    if args.format == "json":
        text = output.to_json(doc)
    elif args.format == "yaml":
        text = output.to_yaml(doc)
    else:
        from ccost.diagnostics import escape_controls

        text = escape_controls(output.to_text(doc))  # titles may carry ESC, BEL, ... (JSON/YAML escape them)
    sys.stdout.write(text)
    return 0
