"""``ccost report SPEC... [-o PATH] [--format pdf|html|both]``: write the design review and the results YAML.

By default writes ``reports/<stem>.html``, ``reports/<stem>.pdf`` and ``reports/<stem>.yaml`` relative to
the current folder and prints the paths written, one a line. SPEC is a file or a folder (every ``.ccost``
file below it that has something to review; a library of blocks such as ``specs/std/`` is skipped), as
for ``check``, ``eval`` and ``fmt``; with several specs ``-o`` must name a folder. All outputs of a spec
are written to temporary files first and renamed together, so a failed render leaves the previous review
in place. Set ``SOURCE_DATE_EPOCH`` for a byte-identical rebuild (the cover's date comes from it too).
``--summary`` writes the short review instead (``<stem>-summary.html/.pdf``: the cover, the summary chapter
and the charts, 2-4 pages); ``--format html`` skips the PDF, the slow part, for a quick look.
Exit 0, or 2 when a spec has errors or cannot be written (the other specs are still reviewed).
"""

from __future__ import annotations

import argparse
import os

HELP = "write the design review (HTML, PDF) and a YAML of the results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("specs", nargs="+", metavar="SPEC",
                        help="the .ccost specs to review; a folder means its specs (files that define no "
                             "plan, sweep, comparison or search are skipped)")
    parser.add_argument("-o", "--output", metavar="PATH", default=None,
                        help="a folder (existing, or ending in /) for <stem>.html/.pdf/.yaml, or (one spec) a "
                             "file path whose suffix is replaced (-o out/review.pdf); default reports/<stem>")
    parser.add_argument("--format", choices=("pdf", "html", "both"), default="both",
                        help="which review to render (the YAML of the results is always written); "
                             "default both")
    parser.add_argument("--summary", action="store_true",
                        help="write the short review (<stem>-summary.html/.pdf: recommendation, key numbers, "
                             "checklist verdicts, charts; 2-4 pages) instead of the full one")
    parser.add_argument("--no-git", action="store_true",
                        help="do not record the git revision in the provenance stamp (committed reviews "
                             "use this, so they do not change with every commit)")
    from ccost.commands import runopts

    runopts.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ccost.commands import runopts

    from contextlib import nullcontext

    from ccost.report import pdfproc

    # WeasyPrint imported by a second process while this one builds the review
    early = pdfproc.prestarted() if args.format in ("pdf", "both") else nullcontext()
    with early, runopts.execution(args):  # --jobs / --scheduler: where the searches run
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ccost.commands.paths import STDIN, expand
    from ccost.diagnostics import CcostError, error
    from ccost.report.provenance import build_date

    try:
        build_date()  # a malformed SOURCE_DATE_EPOCH is the user's to fix, before any work is done
    except ValueError as exc:
        raise CcostError(error("E504", str(exc),
                               help="unset it, or set it to whole seconds since 1970")) from None
    specs = expand(args.specs)
    if any(a.path == STDIN for a in specs):
        raise CcostError(error("E504", "a review needs its spec as a file: `-` (standard input) is not "
                                       "accepted by ccost report",
                               help="save the spec to a file, or use `ccost eval -` for its numbers"))
    if len(specs) > 1 and args.output and not (args.output.endswith(("/", os.sep)) or os.path.isdir(args.output)):
        raise CcostError(error("E504", f"-o {args.output}: several specs need a folder for their reviews",
                               help=f"end it with a slash (`-o {args.output}/`) or name an existing folder"))
    return _all(specs, args)


def _all(specs, args: argparse.Namespace) -> int:
    from ccost.commands.paths import evaluates_something, failed_one_of_several, say_skipped
    from ccost.diagnostics import CcostError

    status = 0
    for arg in specs:
        if arg.from_folder:
            from ccost.check import check_file

            result = check_file(arg.path)
            if result.spec is not None and not result.errors and not evaluates_something(result.spec):
                say_skipped(arg.path)
                continue
        try:
            _one(arg.path, args)
        except CcostError as exc:
            status = failed_one_of_several(exc, len(specs))
    return status


def _one(spec: str, args: argparse.Namespace) -> None:
    """Review one spec and print the paths written."""
    import sys

    from ccost.diagnostics import CcostError, error
    from ccost.progress import Bar
    from ccost.report import output_paths, write_report

    try:
        _check_output_arg(args.output)
        summary = getattr(args, "summary", False)
        paths = output_paths(spec, args.output, args.format, summary=summary)
        with Bar(sys.stderr) as bar:  # a long search's bar, on a terminal only (as for ccost eval)
            written = write_report(spec, paths, include_git=not args.no_git,
                                   git_note="not recorded (--no-git)", summary=summary, progress=bar)
    except OSError as exc:  # check_targets' refusals, and anything the file system says while writing
        where = exc.filename or "the review"
        raise CcostError(error("E504", f"cannot write {where}: {exc.strerror or exc}",
                               help="nothing was replaced; choose another -o, or fix the folder "
                                    "(it must exist or be creatable, and be writable)")) from None
    except _fetch_error() as exc:
        raise CcostError(error("E504", f"the review was not written: {exc}")) from None
    cwd = os.getcwd()
    for p in written:
        try:
            print(os.path.relpath(p, cwd) if str(p).startswith(cwd) else p)
        except ValueError:
            print(p)


def _check_output_arg(out: str | None) -> None:
    """``-o`` itself may name a folder or a file (existing or not), never a device, FIFO or socket:
    ``-o /dev/null`` would otherwise write /dev/null.html beside the device."""
    import errno
    import stat

    from ccost.report.atomic import OutputError

    if out is None:
        return
    try:
        mode = os.stat(out).st_mode
    except OSError:  # absent (it will be created), or a name too long: check_targets says which
        return
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise OutputError(errno.EINVAL, "-o names a device, FIFO or socket, not a folder or a file", out)


def _fetch_error():
    try:
        from ccost.report.fetcher import BlockedFetch
    except ImportError:  # weasyprint missing: nothing to catch
        return ()
    return BlockedFetch
