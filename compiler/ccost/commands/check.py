"""``ccost check SPEC...``: parse and check specs, print every diagnostic; ``--policy`` also gates on the
policy and the checklist. A clean spec's own plans are also priced once, for what the cost model knows at
check time: a plan that does not fit in GPU memory is a warning (W401, ``ccost.gate.model_diagnostics``).

SPEC is a file, a folder (every ``.ccost`` file below it) or ``-`` (standard input; imports resolve from
the current folder), as for ``eval``, ``report`` and ``fmt``.

Exit status (INTERFACE.md): 0 when every spec is clean (warnings allowed), 2 when a spec has an error,
1 when ``--policy`` finds a plan that fails its policy. Diagnostics go to stderr, the one-line summary of a
clean spec (``specs/x.ccost: ok (3 plans, 1 sweep)``) to stdout; with ``--policy`` one line per plan says
whether it meets its policy and on which numbers (stdout when it does, stderr when it does not).
"""

from __future__ import annotations

import argparse
import sys

HELP = "parse and check specs; with --policy, also gate on the policy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC",
                        help=".ccost files to check; a folder means every .ccost file under it; `-` reads "
                             "standard input (imports resolve from the current folder)")
    parser.add_argument("--policy", action="store_true",
                        help="also evaluate every plan against the spec's policy and the checklist; "
                             "exit 1 when a plan fails")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('h') else 's'}"


def summary(spec) -> str:
    """``3 plans, 1 sweep``: what a clean spec holds (its own plans and everything it can evaluate)."""
    parts = [_plural(len(spec.plans), "plan")]
    for n, word in ((len(spec.sweeps), "sweep"), (len(spec.compares), "comparison"),
                    (len(spec.searches), "search")):
        if n:
            parts.append(_plural(n, word))
    return ", ".join(parts)


def _place(d) -> tuple:
    span = d.span
    return ("", 0, 0) if span is None else (span.file, span.line, span.column)


def run(args: argparse.Namespace) -> int:
    from ccost.check import check_file, check_text
    from ccost.commands.paths import STDIN, expand, read_stdin
    from ccost.diagnostics import CcostError, render_all, use_colour

    status = 0
    clean = []
    for arg in expand(args.specs):
        path = arg.path
        if path == STDIN:
            path = "<stdin>"
            try:
                text = read_stdin()
            except CcostError as exc:
                print(render_all(exc.diagnostics, None, colour=use_colour(sys.stderr)), file=sys.stderr)
                status = 2
                continue
            result = check_text(text, path)
        else:
            result = check_file(path)
        diagnostics = list(result.diagnostics)
        if result.spec is not None and not result.errors:
            # what the cost model knows at check time: a plan that does not fit in memory (W401)
            from ccost.gate import model_diagnostics

            diagnostics = sorted(diagnostics + model_diagnostics(result.spec), key=_place)
        if diagnostics:
            print(render_all(diagnostics, result.sources, colour=use_colour(sys.stderr)), file=sys.stderr)
        if result.spec is None or any(d.is_error for d in diagnostics):
            status = 2
            continue
        spec = result.spec
        note = ""
        if not spec.plans:
            note = " — note: it defines no plans, so there is nothing to evaluate"
        warn = sum(1 for d in diagnostics if not d.is_error)
        warned = f", {warn} warning{'s' if warn != 1 else ''}" if warn else ""
        print(f"{path}: ok ({summary(spec)}{warned}){note}")
        clean.append(spec)
    if status or not args.policy:
        return status
    return _gate(clean)


def _gate(specs) -> int:
    """Evaluate each clean spec and ask ``ccost.gate`` which plans break their policy."""
    from ccost import evaluate, gate

    failed = False
    from ccost.progress import Bar

    for spec in specs:
        with Bar(sys.stderr) as bar:  # a long search's bar, on a terminal only
            results = evaluate.evaluate(spec, progress=bar)
        plans, items = gate.judged(spec, results)
        if not plans:  # nothing was judged: not a green gate
            print(f"{spec.path}: no plans to judge against the policy (the file defines and imports none)")
            continue
        failures = gate.policy_failures(spec, results)
        for line in failures:
            print(f"{spec.path}: {line}", file=sys.stderr)
        for line in gate.policy_passes(spec, results):
            print(f"{spec.path}: {line}")
        if failures:
            failed = True
        else:
            print(f"{spec.path}: policy ok: {_plural(len(plans), 'plan')} judged on checklist items "
                  f"{', '.join(items) or 'none'}")
    return 1 if failed else 0
