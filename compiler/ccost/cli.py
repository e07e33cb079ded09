"""The ``ccost`` command: a thin dispatcher over ``ccost.commands.<verb>``.

Each verb is a module with ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``. Modules
are imported only when their verb runs, so ``ccost check`` never loads the report, PDF or plotting
libraries. Exit codes (docs/interface.md): 0 fine, 1 a policy or ``--check`` failure, 2 errors in a spec or in
the command line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from ccost import __version__

# verb -> (module, one-line help). The order is the order of `ccost --help`.
VERBS: dict[str, tuple[str, str]] = {
    "check": ("ccost.commands.check", "parse and check specs; with --policy, also gate on the policy"),
    "eval": ("ccost.commands.eval", "evaluate plans, sweeps, comparisons and searches"),
    "explain": ("ccost.commands.explain", "derive every number of one plan, formula -> values -> result"),
    "export": ("ccost.commands.export", "print the engine launch settings and a benchmark command for a serving "
               "plan's fleet"),
    "report": ("ccost.commands.report", "write the design review (HTML, PDF) and a YAML of the results"),
    "fmt": ("ccost.commands.fmt", "rewrite specs in canonical form, comments kept"),
    "diff": ("ccost.commands.diff", "what a change to a spec did to its inputs and results"),
    "calibrate": ("ccost.commands.calibrate", "fit alpha and bandwidth from nccl-tests logs"),
    "schema": ("ccost.commands.schema", "print the language reference, or (--results) the results' JSON Schema"),
    "import": ("ccost.commands.import_hf", "print a model block from a Hugging Face config.json"),
    "init": ("ccost.commands.init", "write a starter spec for a bundled model and cluster"),
    "lsp": ("ccost.commands.lsp", "the language server for editors (stdio; needs the `lsp` extra, docs/editors.md)"),
}

EXIT_OK, EXIT_FAIL, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 70


def _available() -> dict[str, tuple[str, str]]:
    """Verbs whose module exists in this build (keeps --help honest while verbs are being added)."""
    from importlib.util import find_spec

    return {v: m for v, m in VERBS.items() if find_spec(m[0]) is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ccost",
        description="Turn a .ccost spec of GPUs, links, clusters, models and parallel layouts into a "
        "priced, reviewable capacity plan.",
        epilog="Run `ccost VERB --help` for the options of one verb. Docs: docs/ in the repository.",
    )
    parser.add_argument("--version", action="version", version=f"ccost {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, (module, help_text) in _available().items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        # add_arguments is looked up lazily at dispatch for speed, except when --help needs it.
        p.set_defaults(_verb=verb)
    return parser


def complete(output_stream=None) -> int:
    """Shell completion through argcomplete (the ``completion`` extra; docs/editors.md shows the
    one line each of bash, zsh and fish needs). Runs only when the shell asks (``_ARGCOMPLETE`` is set), so
    no other command imports argcomplete; every verb's options are loaded here, and SPEC arguments
    complete to .ccost files and folders."""
    try:
        import argcomplete
        from argcomplete.completers import FilesCompleter
    except ImportError:  # completion not installed: offer nothing rather than fail in the shell
        return EXIT_OK
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    specs = FilesCompleter(allowednames=("ccost",), directories=True)
    for verb, sub in subparsers.choices.items():
        importlib.import_module(VERBS[verb][0]).add_arguments(sub)
        for action in sub._actions:
            if action.metavar == "SPEC":
                action.completer = specs  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser, output_stream=output_stream)
    return EXIT_OK


class _Output:
    """``sys.stdout`` or ``sys.stderr`` while a verb runs, for a reader that may go away: with
    ``ccost check --policy spec | head -1`` the pipe closes after one line. A write or flush that finds the
    pipe closed makes the stream a sink (the descriptor is pointed at ``/dev/null``, so nothing buffered
    fails later either) and the verb carries on to its result: the exit status is the check's, never a
    success made up because the output was cut (``set -o pipefail`` then sees the failure). A closed
    output is not an error of the command, so nothing is said about it."""

    def __init__(self, stream):
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._sink()
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        # a stream the verb closed itself (the language server closes stdout as it exits) has nothing to flush
        if not self.reader_gone and not getattr(self._stream, "closed", False):
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._sink()

    def _sink(self) -> None:
        self.reader_gone = True
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # a test's StringIO: nothing buffered below it
            return
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
        try:
            self._stream.flush()  # what was buffered goes to /dev/null now
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    if argv is None and "_ARGCOMPLETE" in os.environ:
        return complete()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Output(stdout), _Output(stderr)
    try:
        return _main(argv)
    finally:
        for wrapped in (sys.stdout, sys.stderr):
            if isinstance(wrapped, _Output):
                wrapped.flush()
        sys.stdout, sys.stderr = stdout, stderr


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Two-phase parsing: find the verb, then let its module add its own options.
    verb = next((a for a in argv if not a.startswith("-")), None)
    if verb in VERBS and verb in _available():
        module = importlib.import_module(VERBS[verb][0])
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        module.add_arguments(subparsers.choices[verb])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help/--version
        return int(exc.code or 0)
    if not getattr(args, "verb", None):
        parser.print_help()
        return EXIT_ERROR
    module = importlib.import_module(args._module)
    from ccost.diagnostics import CcostError, render_all, use_colour

    try:
        with warnings.catch_warnings():
            # numpy's floating-point notices ("overflow encountered in divide", with a source line) are not
            # for the user: the field ranges keep real specs clear of them, and an overflow at their edges
            # gives inf, which the output shows as such
            warnings.filterwarnings("ignore", message=r"(overflow|invalid value|divide by zero|underflow) "
                                    r"encountered", category=RuntimeWarning)
            return int(module.run(args) or 0)
    except CcostError as exc:
        print(render_all(exc.diagnostics, getattr(exc, "sources", None), use_colour(sys.stderr)),
              file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("ccost: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in ccost: one clear line, the traceback only on request
        if os.environ.get("CCOST_DEBUG"):
            raise
        from ccost.diagnostics import escape_controls

        print(f"ccost: internal error: {type(exc).__name__}: {escape_controls(str(exc))}\n"
              "This is a bug in ccost, not in your spec. Run again with CCOST_DEBUG=1 for the traceback "
              "and report it.", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
